import type { KeyboardEvent, Ref } from 'react';

/**
 * Search within the loaded log: the text to find, how many matches and which one is shown,
 * previous/next. Enter goes to the next match, Shift+Enter to the previous, Escape clears.
 */
export function SearchBar({
  query,
  onQueryChange,
  count,
  truncated,
  active,
  onStep,
  inputRef,
}: {
  query: string;
  onQueryChange: (query: string) => void;
  count: number;
  truncated: boolean;
  active: number;
  /** Move to the next (+1) or previous (-1) match. */
  onStep: (direction: 1 | -1) => void;
  inputRef?: Ref<HTMLInputElement>;
}) {
  const onKeyDown = (event: KeyboardEvent<HTMLInputElement>) => {
    if (event.key === 'Enter') {
      event.preventDefault();
      onStep(event.shiftKey ? -1 : 1);
    } else if (event.key === 'Escape') {
      onQueryChange('');
    }
  };
  const summary =
    query === ''
      ? ''
      : count === 0
        ? 'No matches'
        : `${active + 1} of ${count}${truncated ? '+' : ''}`;
  return (
    <div className="search" role="search">
      <input
        ref={inputRef}
        type="search"
        aria-label="Search the log"
        placeholder="Search the log (press /)"
        value={query}
        onChange={(event) => onQueryChange(event.target.value)}
        onKeyDown={onKeyDown}
      />
      <span data-testid="search-count" aria-live="polite">
        {summary}
      </span>
      <button
        type="button"
        aria-label="Previous match"
        disabled={count === 0}
        onClick={() => onStep(-1)}
      >
        ↑
      </button>
      <button
        type="button"
        aria-label="Next match"
        disabled={count === 0}
        onClick={() => onStep(1)}
      >
        ↓
      </button>
    </div>
  );
}
