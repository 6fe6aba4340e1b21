import { useEffect, useLayoutEffect, useMemo, useRef } from 'react';
import type { UIEvent } from 'react';
import type { Mark } from '../ansi.js';
import type { LogLines } from './log-buffer.js';
import { LEVEL_ERROR, LEVEL_WARNING } from './log-levels.js';
import type { Match } from './log-search.js';
import { plainRows } from './log-sections.js';
import type { Rows, Section } from './log-sections.js';
import { formatClock, formatElapsed } from './line-time.js';
import { LogRow } from './LogRow.js';
import type { RowActions } from './LogRow.js';
import type { TimestampMode } from './view-settings.js';
import { useRowWindow } from './use-row-window.js';
import './log-view.css';

/** How close to the bottom (px) still counts as "at the bottom" for follow mode. */
const BOTTOM_SLACK = 24;
const LINE_HEIGHT = 20;

/** What the view knows of each line besides its text (the log buffer). */
export interface LineInfo {
  timeOf(index: number): number;
  levelOf(index: number): number;
}

const NO_INFO: LineInfo = { timeOf: () => Number.NaN, levelOf: () => 0 };

/** Lines by index in `lines`, `first <= last`. */
export interface IndexRange {
  first: number;
  last: number;
}

/**
 * The log, virtualized (only the rows in view are in the DOM), with line numbers, ANSI colours
 * and search matches. While `follow` is on it keeps the newest line in view like `tail -f`;
 * scrolling away from the bottom turns it off, scrolling back to the bottom turns it on.
 *
 * It shows `rows`: the lines, less those of folded sections, each of which is one header row
 * (a group's header is its `::group::` line; a step's is a row of its own). Line numbers are
 * links to the line (`#L<n>`): a click selects it, a shift-click the range from the last one
 * clicked. Each line can show its time, and long lines can wrap.
 */
export function LogView({
  lines,
  firstLine = 0,
  version,
  follow,
  onFollowChange,
  matches,
  active,
  target = null,
  targetMove = 0,
  rows = plainRows(lines.length),
  sections = [],
  folded = () => false,
  onToggle = () => {},
  info = NO_INFO,
  timestamps = 'off',
  startTime = Number.NaN,
  wrap = false,
  highlight = null,
  focus = null,
  onLineClick,
  onCopyLink,
}: {
  lines: LogLines;
  /** Lines of the log before `lines.line(0)` that the view let go (they are numbered on from there). */
  firstLine?: number;
  /** Changes whenever `lines` (appended in place) changes. */
  version: number;
  follow: boolean;
  onFollowChange: (follow: boolean) => void;
  matches: readonly Match[];
  /** The index in `matches` of the match to show, or -1. */
  active: number;
  /** The index in `lines` of the line to bring to the middle (`#L…`, an error), or null. */
  target?: number | null;
  /** Changes with each move to `target`: it is scrolled to again. */
  targetMove?: number | string;
  rows?: Rows;
  /** The sections `rows` were made from (a step header row is `-1 - index` in it). */
  sections?: readonly Section[];
  folded?: (section: Section) => boolean;
  onToggle?: (section: Section) => void;
  info?: LineInfo;
  timestamps?: TimestampMode;
  /** When the run began (ms), for elapsed times. */
  startTime?: number;
  wrap?: boolean;
  /** Lines highlighted (`line-target`): the address's line or range. */
  highlight?: IndexRange | null;
  /** The line "next error" (or a gutter mark) went to, outlined (`line-focus`). */
  focus?: number | null;
  /** A click on a line's number (shift held: a range). Without it the link is followed. */
  onLineClick?: (index: number, extend: boolean) => void;
  onCopyLink?: (index: number) => void;
}) {
  const scrollRef = useRef<HTMLDivElement>(null);
  const contentRef = useRef<HTMLDivElement>(null);
  const rowWindow = useRowWindow({
    scrollRef,
    contentRef,
    count: rows.length,
    estimate: LINE_HEIGHT,
    overscan: 20,
    measure: wrap,
    pinBottom: follow,
  });
  const { scrollToIndex, totalSize } = rowWindow;

  const marksByLine = useMemo(() => {
    const byLine = new Map<number, Mark[]>();
    matches.forEach((match, index) => {
      const marks = byLine.get(match.line) ?? [];
      marks.push({ start: match.start, end: match.end, active: index === active });
      byLine.set(match.line, marks);
    });
    return byLine;
  }, [matches, active]);

  const groupAt = useMemo(() => {
    const byLine = new Map<number, Section>();
    for (const section of sections)
      if (section.kind === 'group') byLine.set(section.first, section);
    return byLine;
  }, [sections]);

  // Where the log was last scrolled to, by the user or by following.
  const lastScrollTop = useRef(0);

  // `lines` grows in place, so a render for any reason may show more of it than the last
  // `version`: follow what was rendered, not what was announced. Folding changes the rows too.
  const count = lines.length;
  const rowCount = rows.length;
  useLayoutEffect(() => {
    const element = scrollRef.current;
    if (!follow || !element) return;
    element.scrollTop = element.scrollHeight;
    lastScrollTop.current = element.scrollTop;
  }, [follow, count, rowCount, version, wrap, totalSize]);

  // Lines let go above the view: keep what the user is reading where it is.
  const previousFirstLine = useRef(firstLine);
  useLayoutEffect(() => {
    const letGo = firstLine - previousFirstLine.current;
    previousFirstLine.current = firstLine;
    const element = scrollRef.current;
    if (letGo <= 0 || follow || !element) return;
    element.scrollTop = Math.max(0, element.scrollTop - letGo * LINE_HEIGHT);
    lastScrollTop.current = element.scrollTop;
  }, [firstLine, follow]);

  const activeLine = matches[active]?.line;
  const activeRow = activeLine === undefined ? undefined : rows.rowOf(activeLine);
  useEffect(() => {
    if (activeRow !== undefined) scrollToIndex(activeRow);
  }, [activeRow, active, scrollToIndex]);

  // The target line, once it is loaded (history may still be arriving): to the middle, once per
  // move, so that scrolling away from it afterwards is the user's to do.
  const scrolledTo = useRef<string | null>(null);
  const targetRow = target === null || target < 0 || target >= count ? null : rows.rowOf(target);
  useEffect(() => {
    if (targetRow === null) return;
    const move = `${targetMove}:${target}`;
    if (scrolledTo.current === move) return;
    scrolledTo.current = move;
    scrollToIndex(targetRow);
  }, [target, targetRow, targetMove, scrollToIndex]);
  // While a target is waited for or was just shown, reaching the bottom (a short log, a target
  // near the end) does not resume follow: only the user's own scrolling does, or Jump to latest.
  const pinned = useRef(false);
  useLayoutEffect(() => {
    if (target !== null) pinned.current = true;
  }, [target, targetMove]);
  const unpin = () => {
    pinned.current = false;
  };

  // Only a move up pauses follow: while text pours in, a scroll event can arrive after the log
  // grew and before it was scrolled to its new end, which is not the user leaving the bottom.
  const onScroll = (event: UIEvent<HTMLDivElement>) => {
    const element = event.currentTarget;
    const movedUp = element.scrollTop < lastScrollTop.current;
    lastScrollTop.current = element.scrollTop;
    const atBottom =
      element.scrollTop + element.clientHeight >= element.scrollHeight - BOTTOM_SLACK;
    if (follow && movedUp && !atBottom) onFollowChange(false);
    else if (!follow && atBottom && !pinned.current) onFollowChange(true);
  };

  const digits = String(Math.max(firstLine + lines.length, 1)).length;
  const timeOf = (index: number) => {
    if (timestamps === 'off') return null;
    const time = info.timeOf(index);
    const text = timestamps === 'clock' ? formatClock(time) : formatElapsed(time, startTime);
    return text.padStart(timestamps === 'clock' ? 12 : 10, ' ');
  };
  // The rows' handlers, one object for the view's life (rows are memoized), calling whatever
  // the view was last given.
  const latest = useRef({ onLineClick, onCopyLink, onToggle });
  useLayoutEffect(() => {
    latest.current = { onLineClick, onCopyLink, onToggle };
  });
  const actions = useMemo<RowActions>(
    () => ({
      lineClick: (line, extend) => {
        const click = latest.current.onLineClick;
        if (!click) return false;
        click(line, extend);
        return true;
      },
      copyLink: (line) => latest.current.onCopyLink?.(line),
      toggle: (section) => latest.current.onToggle(section),
    }),
    [],
  );

  return (
    <div
      ref={scrollRef}
      className={wrap ? 'log log-wrap' : 'log'}
      data-testid="log"
      role="log"
      aria-label="Run log"
      aria-live="off"
      // Focusable, so the keyboard can scroll it.
      tabIndex={0}
      onScroll={onScroll}
      onWheel={unpin}
      onKeyDown={unpin}
      onPointerDown={unpin}
      onTouchStart={unpin}
    >
      <div ref={contentRef} style={{ height: totalSize, position: 'relative', width: '100%' }}>
        {rowWindow.rows.map((item) => {
          const at = rows.at(item.index);
          const height = wrap ? undefined : item.size;
          if (at < 0) {
            const section = sections[-1 - at]!;
            return (
              <LogRow
                key={item.index}
                rowIndex={item.index}
                start={item.start}
                height={height}
                line={-1}
                number={0}
                digits={digits}
                className={
                  section.error
                    ? 'log-line section-header section-failed'
                    : 'log-line section-header'
                }
                time={timeOf(section.first)}
                text=""
                marks={undefined}
                section={section}
                sectionFolded={folded(section)}
                canCopy={false}
                actions={actions}
              />
            );
          }
          const group = groupAt.get(at);
          const level = info.levelOf(at);
          const classes = ['log-line'];
          if (highlight && at >= highlight.first && at <= highlight.last) {
            classes.push('line-target');
            if (highlight.first !== highlight.last) classes.push('line-in-range');
          }
          if (at === focus) classes.push('line-focus');
          if (level === LEVEL_ERROR) classes.push('line-error');
          else if (level === LEVEL_WARNING) classes.push('line-warning');
          if (group) classes.push('section-header');
          if (group?.error) classes.push('section-failed');
          return (
            <LogRow
              key={item.index}
              rowIndex={item.index}
              start={item.start}
              height={height}
              line={at}
              number={firstLine + at + 1}
              digits={digits}
              className={classes.join(' ')}
              time={timeOf(at)}
              text={group ? '' : lines.line(at)}
              marks={marksByLine.get(at)}
              section={group}
              sectionFolded={group ? folded(group) : false}
              canCopy={onCopyLink !== undefined}
              actions={actions}
            />
          );
        })}
      </div>
    </div>
  );
}
