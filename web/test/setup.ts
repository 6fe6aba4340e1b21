import { cleanup } from '@testing-library/react';
import { afterEach } from 'vitest';

// jsdom lays nothing out: give elements a viewport so the virtualized log renders rows.
Object.defineProperty(HTMLElement.prototype, 'clientHeight', {
  configurable: true,
  get: () => 400,
});
Object.defineProperty(HTMLElement.prototype, 'clientWidth', { configurable: true, get: () => 800 });
Object.defineProperty(HTMLElement.prototype, 'offsetHeight', {
  configurable: true,
  get: () => 400,
});
Object.defineProperty(HTMLElement.prototype, 'offsetWidth', { configurable: true, get: () => 800 });

afterEach(() => {
  cleanup();
});
