import type { FakeTail } from './fake-tail.js';

/** jsdom lays nothing out: give the log element a scroll geometry the test controls. */
export function geometry(element: HTMLElement, scrollHeight: number) {
  let scrollTop = 0;
  const box = { scrollHeight };
  Object.defineProperty(element, 'scrollHeight', {
    configurable: true,
    get: () => box.scrollHeight,
  });
  Object.defineProperty(element, 'scrollTop', {
    configurable: true,
    get: () => scrollTop,
    set: (value: number) => {
      scrollTop = Math.max(0, Math.min(value, box.scrollHeight - element.clientHeight));
    },
  });
  return box;
}

/** Appends `line <from>` … `line <to>` as one log entry. */
export function lines(fake: FakeTail, from: number, to: number) {
  let text = '';
  for (let n = from; n <= to; n += 1) text += `line ${n}\n`;
  fake.entry({ kind: 'log', text });
}

/** The text of each log row in the DOM (the virtualized ones in view). */
export function renderedLines(log: HTMLElement): string[] {
  return [...log.querySelectorAll('.line-text')].map((row) => row.textContent ?? '');
}
