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

// jsdom draws nothing: a 2D context and Path2D whose calls do nothing let uPlot (the pipeline
// page's chart) run its whole drawing, path builders included, so a test reads what it drew.
const doNothing = new Proxy(
  {},
  { get: (_target, name) => (name === 'measureText' ? () => ({ width: 0 }) : () => undefined) },
);
HTMLCanvasElement.prototype.getContext = function getContext(this: HTMLCanvasElement) {
  return new Proxy(
    { canvas: this },
    {
      get: (target, name) =>
        name in target ? target[name as 'canvas'] : Reflect.get(doNothing, name),
      set: () => true,
    },
  );
} as unknown as HTMLCanvasElement['getContext'];
class NoPath2D {}
Object.setPrototypeOf(NoPath2D.prototype, doNothing);
(globalThis as { Path2D?: unknown }).Path2D ??= NoPath2D;

// uPlot watches the pixel ratio with matchMedia, which jsdom lacks; tests of the system theme
// put their own in place (fake-media.ts).
if (typeof window.matchMedia !== 'function') {
  window.matchMedia = (query: string) =>
    ({
      media: query,
      matches: false,
      addEventListener: () => undefined,
      removeEventListener: () => undefined,
    }) as unknown as MediaQueryList;
}

afterEach(() => {
  cleanup();
});
