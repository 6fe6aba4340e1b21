import { describe, expect, test } from 'vitest';
import Anser from 'anser';
import { LOG_BACKGROUND, luminance, READABLE_FOREGROUND, textOn } from '../src/ansi-palette.js';

const contrast = (a: string, b: string): number => {
  const [light, dark] = [luminance(a), luminance(b)].sort((x, y) => y - x);
  return (light! + 0.05) / (dark! + 0.05);
};

describe('the ANSI palette of the log', () => {
  test('covers every colour anser writes for the 16 standard codes', () => {
    for (const code of [30, 31, 32, 33, 34, 35, 36, 37, 90, 91, 92, 93, 94, 95, 96, 97]) {
      const [part] = Anser.ansiToJson(`\u001b[${code}mx`, { remove_empty: true });
      expect(READABLE_FOREGROUND[part!.fg], `code ${code}`).toBeDefined();
    }
  });

  test('every standard colour reads on the log background at WCAG AA (4.5:1)', () => {
    for (const [from, to] of Object.entries(READABLE_FOREGROUND)) {
      expect(contrast(to, LOG_BACKGROUND), `${from} → ${to}`).toBeGreaterThanOrEqual(4.5);
    }
  });

  test('text on a coloured background is dark or white, whichever reads', () => {
    for (const code of [40, 41, 42, 43, 44, 45, 46, 47, 100, 101, 102, 103, 104, 105, 106, 107]) {
      const [part] = Anser.ansiToJson(`\u001b[${code}mx`, { remove_empty: true });
      const background = part!.bg;
      expect(contrast(textOn(background), background), `code ${code}`).toBeGreaterThanOrEqual(4.5);
    }
  });
});
