import { useMemo, useState } from 'react';
import type { LogBuffer } from './log-buffer.js';
import { rowsOf, sectionsOf } from './log-sections.js';
import type { Rows, Section } from './log-sections.js';

export interface FoldedLog {
  sections: Section[];
  rows: Rows;
  folded(section: Section): boolean;
  toggle(section: Section): void;
}

const holds = (section: Section, line: number) => section.first <= line && line <= section.last;

/**
 * The log's sections and which are folded. By default a section that failed (an error line in
 * it, or its step's `failed` event) is open, and so is every section while the run is going;
 * the rest of a finished run's are folded. A click on a header decides for that section from
 * then on, except that a section holding a line to show — the search match shown, the line an
 * address or "next error" goes to (`reveal`, indices in the buffer) — opens when that line
 * becomes the one to show. Folding hides rows, never renumbers lines.
 */
export function useSections(
  buffer: LogBuffer,
  version: number,
  {
    finished,
    failedSteps,
    reveal,
  }: { finished: boolean; failedSteps: ReadonlySet<string>; reveal: readonly number[] },
): FoldedLog {
  // `version` and the length stand for the buffer's contents, which change in place: a render
  // for another reason may show lines the last version did not announce yet.
  const count = buffer.length;
  // eslint-disable-next-line react-hooks/exhaustive-deps
  const sections = useMemo(() => sectionsOf(buffer), [buffer, version, count]);
  const [chosen, setChosen] = useState<ReadonlyMap<string, boolean>>(new Map());

  // A new line to show: the user's choices for the sections around it give way.
  const revealKey = reveal.join(',');
  const [revealed, setRevealed] = useState(revealKey);
  if (revealed !== revealKey) {
    setRevealed(revealKey);
    const around = sections.filter(
      (section) => chosen.get(section.key) === true && reveal.some((line) => holds(section, line)),
    );
    if (around.length > 0) {
      const next = new Map(chosen);
      for (const section of around) next.delete(section.key);
      setChosen(next);
    }
  }

  const folded = useMemo(() => {
    const lines = revealKey === '' ? [] : revealKey.split(',').map(Number);
    return (section: Section) => {
      const choice = chosen.get(section.key);
      if (choice !== undefined) return choice;
      if (lines.some((line) => holds(section, line))) return false;
      const failed = section.error || (section.kind === 'step' && failedSteps.has(section.title));
      return finished && !failed;
    };
  }, [chosen, revealKey, finished, failedSteps]);
  const rows = useMemo(() => rowsOf(count, sections, folded), [count, sections, folded]);
  const toggle = (section: Section) =>
    setChosen((previous) => new Map(previous).set(section.key, !folded(section)));
  return { sections, rows, folded, toggle };
}
