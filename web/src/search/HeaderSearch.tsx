import { useState } from 'react';
import type { FormEvent } from 'react';

/**
 * The header's search box, on every page: Enter opens the search page for its text
 * (docs/DASHBOARD.md, "Searching every run").
 */
export function HeaderSearch({
  initial = '',
  onSearch,
}: {
  initial?: string;
  onSearch: (q: string) => void;
}) {
  const [text, setText] = useState(initial);
  const submit = (event: FormEvent<HTMLFormElement>) => {
    event.preventDefault();
    const q = text.trim();
    if (q !== '') onSearch(q);
  };
  return (
    <form className="header-search" role="search" aria-label="All logs" onSubmit={submit}>
      <input
        type="search"
        name="q"
        aria-label="Search all logs"
        placeholder="Search all logs"
        spellCheck={false}
        value={text}
        onChange={(event) => setText(event.target.value)}
      />
    </form>
  );
}
