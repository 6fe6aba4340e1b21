/** A line's level, as kept per line (a Uint8Array): the higher wins. */
export const LEVEL_NONE = 0;
export const LEVEL_WARNING = 1;
export const LEVEL_ERROR = 2;

/**
 * What makes a line an error or a warning: JavaScript regular expressions (as source text, so
 * they can be kept as JSON), matched anywhere in the line's raw text, ANSI codes included, case
 * sensitive. docs/DASHBOARD.md, "Errors and warnings".
 */
export interface LevelRules {
  error: readonly string[];
  warning: readonly string[];
}

export const DEFAULT_LEVEL_RULES: LevelRules = {
  error: [
    // Red or bright red foreground (`ESC[31m`, `ESC[1;31m`, `ESC[91m`).
    String.raw`\u001b\[(?:\d*;)*(?:31|91)m`,
    String.raw`\bERROR\b`,
    String.raw`\bFATAL\b`,
    String.raw`Traceback \(most recent call last\)`,
    String.raw`::error\b`,
    String.raw`##\[error\]`,
  ],
  warning: [
    String.raw`\u001b\[(?:\d*;)*(?:33|93)m`,
    String.raw`\bWARN(?:ING)?\b`,
    String.raw`::warning\b`,
    String.raw`##\[warning\]`,
  ],
};

/** Where a browser keeps rules of its own (JSON of LevelRules; either list may be left out). */
export const LEVEL_RULES_KEY = 'tailwater.log.levels';

/** The rules of this browser, or the defaults (a setting that is not valid JSON is ignored). */
export function storedLevelRules(storage: Pick<Storage, 'getItem'> | null): LevelRules {
  try {
    const raw = storage?.getItem(LEVEL_RULES_KEY);
    if (!raw) return DEFAULT_LEVEL_RULES;
    const parsed = JSON.parse(raw) as Partial<Record<keyof LevelRules, unknown>>;
    const list = (value: unknown, fallback: readonly string[]) =>
      Array.isArray(value) && value.every((item) => typeof item === 'string') ? value : fallback;
    return {
      error: list(parsed.error, DEFAULT_LEVEL_RULES.error),
      warning: list(parsed.warning, DEFAULT_LEVEL_RULES.warning),
    };
  } catch {
    return DEFAULT_LEVEL_RULES;
  }
}

/** One global expression per level (null for no rules), tried over whole pieces of text. */
export interface LevelPatterns {
  error: RegExp | null;
  warning: RegExp | null;
}

export function levelPatterns(rules: LevelRules): LevelPatterns {
  const join = (sources: readonly string[]) => {
    const valid = sources.filter((source) => {
      try {
        new RegExp(source);
        return true;
      } catch {
        console.warn(`Ignoring the log level rule ${source}: not a valid regular expression.`);
        return false;
      }
    });
    return valid.length === 0 ? null : new RegExp(valid.map((s) => `(?:${s})`).join('|'), 'g');
  };
  return { error: join(rules.error), warning: join(rules.warning) };
}
