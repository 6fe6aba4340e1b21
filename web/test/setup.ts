import { cleanup, configure } from '@testing-library/react';
import { afterEach } from 'vitest';

// findBy… and waitFor wait for what a render does next. Their default second is short on a
// loaded machine (the whole suite runs at once), where a render of a few hundred rows can take
// longer: waiting longer changes no assertion, only how long a failure takes to report.
configure({ asyncUtilTimeout: 5000 });

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

// jsdom has no Element.scrollTo; the virtualizer scrolls to a row with it.
if (typeof HTMLElement.prototype.scrollTo !== 'function') {
  HTMLElement.prototype.scrollTo = function scrollTo(this: HTMLElement, options?: unknown) {
    const top = (options as ScrollToOptions | undefined)?.top;
    if (typeof top === 'number') this.scrollTop = top;
    // A browser fires scroll after a programmatic scroll too, later (the virtualizer listens).
    setTimeout(() => this.dispatchEvent(new Event('scroll')), 0);
  } as HTMLElement['scrollTo'];
}

afterEach(() => {
  cleanup();
});
