import { memo } from 'react';
import type { MouseEvent } from 'react';
import { AnsiLine } from '../ansi.js';
import type { Mark } from '../ansi.js';
import type { Section } from './log-sections.js';
import { formatSpan } from './line-time.js';

/** What a row does when clicked: one object for the life of the view, so rows can be memoized. */
export interface RowActions {
  /** A click on a line's number (shift held: a range); false: the link is followed. */
  lineClick(line: number, extend: boolean): boolean;
  copyLink(line: number): void;
  toggle(section: Section): void;
}

/**
 * One row of the log: a line, a group's `::group::` line (drawn as its section's header) or a
 * step's header. Every prop is a value or an object that only changes when the row must be
 * drawn again, so a scroll draws only the rows that came into view (docs/BENCHMARKS.md,
 * "Dashboard": a flick of 600 px a frame).
 */
export const LogRow = memo(function LogRow({
  rowIndex,
  start,
  height,
  line,
  number,
  digits,
  className,
  time,
  text,
  marks,
  section,
  sectionFolded,
  canCopy,
  actions,
}: {
  /** Where the row is among the rows drawn (`data-index`) and where it is placed (px). */
  rowIndex: number;
  start: number;
  /** Its height (px), or undefined: wrapped, as high as its text. */
  height: number | undefined;
  /** Its line's index in the log, or -1: a step's header, which is no line. */
  line: number;
  /** The line's number as the reader counts them. */
  number: number;
  /** How many digits the highest line number has: numbers are padded to it. */
  digits: number;
  className: string;
  /** The time shown before the text, padded, or null: none. */
  time: string | null;
  text: string;
  marks: readonly Mark[] | undefined;
  /** The section this row heads, if it heads one. */
  section: Section | undefined;
  sectionFolded: boolean;
  canCopy: boolean;
  actions: RowActions;
}) {
  const style = {
    position: 'absolute' as const,
    top: 0,
    left: 0,
    width: '100%',
    ...(height === undefined ? {} : { height }),
    transform: `translateY(${start}px)`,
  };
  const timeCell =
    time === null ? null : (
      <span className="line-time" data-testid="line-time">
        {time}
      </span>
    );
  const header = section ? (
    <SectionHeader section={section} folded={sectionFolded} actions={actions} />
  ) : null;
  if (line < 0) {
    return (
      <div className={className} data-index={rowIndex} data-section={section?.key} style={style}>
        <span className="line-number" aria-hidden="true">
          {' '.repeat(digits)}
        </span>
        {timeCell}
        {header}
      </div>
    );
  }
  const onClick = (event: MouseEvent<HTMLAnchorElement>) => {
    // Another tab or window: the browser's to do.
    if (event.metaKey || event.ctrlKey || event.altKey || event.button !== 0) return;
    if (actions.lineClick(line, event.shiftKey)) event.preventDefault();
  };
  return (
    <div
      className={className}
      data-index={rowIndex}
      data-line={number}
      {...(section ? { 'data-section': section.key } : {})}
      style={style}
    >
      <a
        className="line-number"
        href={`#L${number}`}
        aria-label={`Line ${number}`}
        onClick={onClick}
        // A number is not text to select along with the log's.
        onMouseDown={(event) => event.shiftKey && event.preventDefault()}
      >
        {String(number).padStart(digits, ' ')}
      </a>
      {timeCell}
      {header ?? (
        <span className="line-text">
          <AnsiLine text={text} marks={marks} />
        </span>
      )}
      {canCopy ? (
        <button
          type="button"
          className="copy-link"
          aria-label={`Copy link to line ${number}`}
          onClick={() => actions.copyLink(line)}
        >
          Copy link
        </button>
      ) : null}
    </div>
  );
});

/**
 * A section's header: one button from the arrow to the end of the row, as in the CI log views
 * users know, so a click anywhere on its title or facts (or Enter or Space once focused) folds
 * or unfolds it. Its accessible name is what it shows (title and facts) after "Fold"/"Unfold".
 */
function SectionHeader({
  section,
  folded,
  actions,
}: {
  section: Section;
  folded: boolean;
  actions: RowActions;
}) {
  const duration = sectionDuration(section.durationMs);
  return (
    <button
      type="button"
      className="section-toggle"
      aria-expanded={!folded}
      onClick={() => actions.toggle(section)}
      style={{ paddingLeft: `${section.depth}rem` }}
    >
      <span className="section-arrow" aria-hidden="true">
        {folded ? '▸' : '▾'}
      </span>
      {/* Its name is what it shows (WCAG 2.5.3), with what a click does before it. */}
      <span className="visually-hidden">{folded ? 'Unfold ' : 'Fold '}</span>
      <span className="section-title">
        {section.kind === 'step' ? <span className="section-kind">step </span> : null}
        {section.title || (section.kind === 'group' ? 'group' : '')}
      </span>
      <span className="section-facts" data-testid="section-facts">
        {section.lines.toLocaleString('en-US')} {section.lines === 1 ? 'line' : 'lines'}
        {duration ? ` · ${duration}` : ''}
        {section.error ? <span className="section-error"> · error</span> : null}
      </span>
    </button>
  );
}

/**
 * A section's duration as its header says it, or '' when there is none to say: lines written in
 * the same millisecond (or read without times) tell nothing of how long the work took.
 */
function sectionDuration(ms: number): string {
  return ms >= 1 ? formatSpan(ms) : '';
}
