import { LEVEL_ERROR } from './log-levels.js';
import type { LevelMark } from './level-marks.js';

/**
 * Beside the log's scrollbar: a mark for each stretch of the log with an error (red) or a
 * warning (amber), where it is in the log; a click goes to its line.
 */
export function LevelGutter({
  marks,
  firstLine,
  onJump,
}: {
  marks: readonly LevelMark[];
  /** Lines let go before the buffer's first (marks are numbered as the log's lines). */
  firstLine: number;
  onJump: (line: number) => void;
}) {
  return (
    <div
      className="log-gutter"
      data-testid="log-gutter"
      role="group"
      aria-label="Errors and warnings"
    >
      {marks.map((mark) => {
        const error = mark.level === LEVEL_ERROR;
        const number = firstLine + mark.line + 1;
        return (
          <button
            key={mark.line}
            type="button"
            className={error ? 'gutter-mark gutter-error' : 'gutter-mark gutter-warning'}
            style={{ top: `${(mark.fraction * 100).toFixed(3)}%` }}
            aria-label={`${error ? 'Error' : 'Warning'} at line ${number}`}
            title={`${error ? 'Error' : 'Warning'} at line ${number}`}
            onClick={() => onJump(mark.line)}
          />
        );
      })}
    </div>
  );
}
