/**
 * Anser's colours for the 16 standard ANSI codes (and palette entries 0–15, the same colours),
 * as it writes them, mapped to colours that read on the log's dark background with at least
 * WCAG AA contrast (4.5:1): terminal red (187, 0, 0) on near-black is 2.9:1. Other colours (the
 * rest of the 256 palette, true colour) are the producer's choice and pass through.
 */
export const READABLE_FOREGROUND: Readonly<Record<string, string>> = {
  '0, 0, 0': '143, 154, 167', // black: a grey, or it would not show at all
  '187, 0, 0': '241, 76, 76',
  '0, 187, 0': '35, 209, 139',
  '187, 187, 0': '229, 229, 16',
  '0, 0, 187': '59, 142, 234',
  '187, 0, 187': '214, 112, 214',
  '0, 187, 187': '41, 184, 219',
  '255,255,255': '229, 229, 229', // anser writes code 37 without spaces
  '85, 85, 85': '157, 165, 180',
  '255, 85, 85': '255, 110, 110',
  '0, 255, 0': '80, 250, 123',
  '255, 255, 85': '245, 245, 67',
  '85, 85, 255': '110, 160, 255',
  '255, 85, 255': '255, 121, 255',
  '85, 255, 255': '110, 240, 255',
  '255, 255, 255': '255, 255, 255',
};

/** The log's background, which the palette is chosen against. */
export const LOG_BACKGROUND = '15, 20, 25';

/** WCAG relative luminance of "r, g, b". */
export function luminance(rgb: string): number {
  const [r, g, b] = rgb.split(',').map((part) => {
    const c = Number(part) / 255;
    return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  });
  return 0.2126 * r! + 0.7152 * g! + 0.0722 * b!;
}

/** Text on a coloured background: dark on light colours, white on dark ones. */
export function textOn(background: string): string {
  return luminance(background) > 0.18 ? LOG_BACKGROUND : '255, 255, 255';
}
