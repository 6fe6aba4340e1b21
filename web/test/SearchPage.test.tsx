import { act, fireEvent, render, screen, waitFor, within } from '@testing-library/react';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import type { SearchHit, SearchPage as SearchAnswer } from '../../src/model/search-result.js';
import { App } from '../src/App.js';
import { SearchPage } from '../src/search/SearchPage.js';
import type { SearchFn } from '../src/search/SearchPage.js';
import { pieces } from '../src/search/hits.js';
import type { SearchParams } from '../src/search/hits.js';
import { fakeServer } from './fake-server.js';
import type { FakeServer } from './fake-server.js';
import { fakeTail } from './fake-tail.js';
import { geometry, lines } from './log-helpers.js';

/** A log hit on `line` of a run, its `needle` matched where it is in the text. */
function hit(partial: Partial<SearchHit> & { line: number | null }, needle = 'needle'): SearchHit {
  const text = partial.text ?? `line ${partial.line} holds the needle`;
  const start = text.toLowerCase().indexOf(needle.toLowerCase());
  return {
    pipeline: 'etl.daily',
    runId: 'r2',
    runStatus: 'failed',
    runCreatedAt: '2026-11-30T02:00:00.000Z',
    kind: 'log',
    seq: partial.line ?? 1,
    offset: 0,
    textStart: 0,
    truncated: false,
    matches: start < 0 ? [] : [[start, start + needle.length]],
    ...partial,
    text,
  };
}

const answer = (hits: SearchHit[], next?: string, lagSeconds = 0): SearchAnswer => ({
  hits,
  ...(next === undefined ? {} : { next }),
  index: { pendingEntries: lagSeconds > 0 ? 3 : 0, lagSeconds },
});

const PARAMS: SearchParams = { q: 'needle', regex: false, pipeline: '' };

/** A search function answering from `pages` by cursor ('' for the first page), recording calls. */
function fakeSearch(pages: Map<string, () => SearchAnswer>) {
  const calls: { q: string; cursor: string | undefined; regex: unknown; pipeline: unknown }[] = [];
  const search: SearchFn = (q, options) => {
    calls.push({ q, cursor: options.cursor, regex: options.regex, pipeline: options.pipeline });
    const page = pages.get(options.cursor ?? '');
    return page ? Promise.resolve(page()) : Promise.reject(new Error('no such page'));
  };
  return { search, calls };
}

const hitLines = (group: HTMLElement) =>
  within(group)
    .getAllByTestId('hit')
    .map((row) => row.querySelector('.hit-line')?.textContent);

let server: FakeServer;
beforeEach(() => {
  server = fakeServer({ authentication: false });
});
afterEach(() => server.restore());

describe('searching every run', () => {
  test('the header search box, on every page, opens the search page for its text', async () => {
    window.history.replaceState(null, '', '/ui/');
    server.routes.set('GET /api/v1/search?q=needle+4242', () => ({
      status: 200,
      body: answer([hit({ line: 7, text: 'found needle 4242 here' }, 'needle 4242')]),
    }));
    render(<App pathname="/ui/" tail={fakeTail().tail} />);
    await screen.findByRole('heading', { name: 'Pipelines and runs' });
    const box = screen.getByRole('searchbox', { name: 'Search all logs' });
    expect(box.getAttribute('type')).toBe('search');
    fireEvent.change(box, { target: { value: ' needle 4242 ' } });
    fireEvent.submit(box);
    expect(window.location.pathname).toBe('/ui/search');
    expect(new URLSearchParams(window.location.search).get('q')).toBe('needle 4242');
    await screen.findByRole('heading', { level: 1, name: 'Search: needle 4242' });
    expect(document.title).toBe('Search: needle 4242 · Tailwater');
    const mark = await screen.findByText('needle 4242', { selector: 'mark' });
    expect(mark.closest('a')?.getAttribute('href')).toBe('/ui/pipelines/etl.daily/runs/r2#L7');
    // The box keeps the text on the search page, and is there on the run view too.
    expect(
      (screen.getByRole('searchbox', { name: 'Search all logs' }) as HTMLInputElement).value,
    ).toBe('needle 4242');
  });

  test('groups hits by run (runs in the API order), lines ascending, each linking to its line', async () => {
    const { search } = fakeSearch(
      new Map([
        [
          '',
          () =>
            answer([
              // Newest run first, later lines first, as docs/SEARCH.md says the API answers.
              hit({
                pipeline: 'a/b',
                runId: 'r 9',
                runStatus: 'running',
                line: 900,
                runCreatedAt: '2026-12-01T00:00:00.000Z',
              }),
              hit({
                pipeline: 'a/b',
                runId: 'r 9',
                runStatus: 'running',
                line: 12,
                runCreatedAt: '2026-12-01T00:00:00.000Z',
              }),
              hit({ line: 300 }),
              hit({ line: 41 }),
              hit({ line: 5 }),
              hit({ line: null, kind: 'event', seq: 2, text: '{"msg":"needle event"}' }),
            ]),
        ],
      ]),
    );
    render(<SearchPage params={PARAMS} onSearch={() => {}} search={search} />);
    const groups = await screen.findAllByTestId('search-run');
    expect(groups.map((group) => group.getAttribute('aria-label'))).toEqual([
      'a/b / r 9',
      'etl.daily / r2',
    ]);
    const [first, second] = groups as [HTMLElement, HTMLElement];
    const heading = within(first).getByRole('heading', { level: 2 });
    expect(within(heading).getByRole('link').getAttribute('href')).toBe(
      '/ui/pipelines/a%2Fb/runs/r%209',
    );
    expect(heading.textContent).toContain('running');
    expect(heading.querySelector('time')?.getAttribute('dateTime')).toBe(
      '2026-12-01T00:00:00.000Z',
    );
    expect(within(second).getByRole('heading', { level: 2 }).textContent).toContain('failed');
    expect(hitLines(first)).toEqual(['12', '900']);
    expect(hitLines(second)).toEqual(['event', '5', '41', '300']);
    const links = within(second).getAllByRole('link').slice(1);
    expect(links.map((link) => link.getAttribute('href'))).toEqual([
      '/ui/pipelines/etl.daily/runs/r2',
      '/ui/pipelines/etl.daily/runs/r2#L5',
      '/ui/pipelines/etl.daily/runs/r2#L41',
      '/ui/pipelines/etl.daily/runs/r2#L300',
    ]);
    expect(within(first).getAllByRole('link')[1]?.getAttribute('href')).toBe(
      '/ui/pipelines/a%2Fb/runs/r%209#L12',
    );
  });

  test('highlights exactly the match ranges, in UTF-16 units, multibyte text before them', async () => {
    const text = 'ünïcødé 日本語 😀 NEEDLE, then 𝄞 needle again';
    const first = text.indexOf('NEEDLE');
    const second = text.lastIndexOf('needle');
    const { search } = fakeSearch(
      new Map([
        [
          '',
          () =>
            answer([
              hit({
                line: 3,
                text,
                matches: [
                  [second, second + 6],
                  [first, first + 6],
                ],
              }),
            ]),
        ],
      ]),
    );
    render(<SearchPage params={PARAMS} onSearch={() => {}} search={search} />);
    const row = await screen.findByTestId('hit');
    const marks = [...row.querySelectorAll('mark')].map((mark) => mark.textContent);
    expect(marks).toEqual(['NEEDLE', 'needle']);
    expect(row.querySelector('.hit-text')?.textContent).toBe(text);
    expect(pieces('ab😀cdef', [[4, 6]])).toEqual([
      { text: 'ab😀', match: false },
      { text: 'cd', match: true },
      { text: 'ef', match: false },
    ]);
  });

  test('"More results" follows next until there is none', async () => {
    const { search, calls } = fakeSearch(
      new Map([
        ['', () => answer([hit({ line: 50 }), hit({ line: 40 })], 'c1')],
        ['c1', () => answer([hit({ line: 30 }), hit({ line: 20 })], 'c2')],
        ['c2', () => answer([hit({ line: 10 })])],
      ]),
    );
    render(<SearchPage params={PARAMS} onSearch={() => {}} search={search} refreshMs={60_000} />);
    await screen.findByText('50');
    fireEvent.click(screen.getByRole('button', { name: 'More results' }));
    await screen.findByText('30');
    fireEvent.click(screen.getByRole('button', { name: 'More results' }));
    await screen.findByText('10');
    expect(hitLines(screen.getByTestId('search-run'))).toEqual(['10', '20', '30', '40', '50']);
    expect(screen.queryByRole('button', { name: 'More results' })).toBeNull();
    expect(calls.map((call) => call.cursor)).toEqual([undefined, 'c1', 'c2']);
  });

  test('says when nothing holds the text, and how far behind the index is', async () => {
    server.routes.set('GET /api/v1/search?q=zzz-none', () => ({
      status: 200,
      body: answer([], undefined, 12.4),
    }));
    render(<SearchPage params={{ ...PARAMS, q: 'zzz-none' }} onSearch={() => {}} />);
    expect((await screen.findByTestId('search-empty')).textContent).toBe(
      'No line of any run holds “zzz-none”.',
    );
    expect(screen.getByTestId('index-lag').textContent).toBe(
      'The index is 12 s behind; the newest lines may not be found yet.',
    );
  });

  test('no lag note while the index is current', async () => {
    const { search } = fakeSearch(new Map([['', () => answer([hit({ line: 1 })])]]));
    render(<SearchPage params={PARAMS} onSearch={() => {}} search={search} />);
    await screen.findByTestId('hit');
    expect(screen.queryByTestId('index-lag')).toBeNull();
  });

  test("shows a 400's message from the server (a refused regex), with regex and pipeline in the request", async () => {
    const message =
      'The expression holds no literal of 3 characters that every match contains: it would read every line.';
    server.routes.set('GET /api/v1/search?q=%5Cd%2B&regex=true&pipeline=etl.*', () => ({
      status: 400,
      body: { error: { code: 'TW_BAD_QUERY', message } },
    }));
    render(
      <SearchPage params={{ q: '\\d+', regex: true, pipeline: 'etl.*' }} onSearch={() => {}} />,
    );
    expect((await screen.findByRole('alert')).textContent).toBe(message);
    expect(screen.queryByTestId('search-empty')).toBeNull();
    expect(
      (screen.getByRole('checkbox', { name: 'Regular expression' }) as HTMLInputElement).checked,
    ).toBe(true);
    expect((screen.getByLabelText('Pipeline') as HTMLInputElement).value).toBe('etl.*');
  });

  test('the regex checkbox and the pipeline field are reflected in the address', async () => {
    window.history.replaceState(null, '', '/ui/search?q=needle');
    server.routes.set('GET /api/v1/search?q=needle', () => ({ status: 200, body: answer([]) }));
    server.routes.set('GET /api/v1/search?q=needle&regex=true', () => ({
      status: 200,
      body: answer([]),
    }));
    server.routes.set('GET /api/v1/search?q=needle&regex=true&pipeline=etl.*', () => ({
      status: 200,
      body: answer([hit({ line: 8 })]),
    }));
    render(<App pathname="/ui/search?q=needle" tail={fakeTail().tail} />);
    await screen.findByTestId('search-empty');
    fireEvent.click(screen.getByRole('checkbox', { name: 'Regular expression' }));
    expect(window.location.search).toBe('?q=needle&regex=true');
    await waitFor(() =>
      expect(server.requests.at(-1)?.path).toBe('/api/v1/search?q=needle&regex=true'),
    );
    fireEvent.change(screen.getByLabelText('Pipeline'), { target: { value: 'etl.*' } });
    fireEvent.submit(screen.getByLabelText('Pipeline'));
    expect(window.location.search).toBe('?q=needle&regex=true&pipeline=etl.*');
    await screen.findByTestId('hit');
  });

  test('live: asks for the first page again and adds new hits without losing those shown', async () => {
    let round = 0;
    const { search, calls } = fakeSearch(
      new Map([
        [
          '',
          () => {
            round += 1;
            const hits =
              round === 1
                ? [hit({ line: 20, runStatus: 'running' }), hit({ line: 10, runStatus: 'running' })]
                : [
                    hit({ line: 30, runStatus: 'running' }),
                    hit({ line: 20, runStatus: 'running' }),
                    hit({ line: 10, runStatus: 'running' }),
                  ];
            return answer(hits, 'older');
          },
        ],
        ['older', () => answer([hit({ line: 2, runStatus: 'running' })])],
      ]),
    );
    render(<SearchPage params={PARAMS} onSearch={() => {}} search={search} refreshMs={40} />);
    await screen.findByText('20');
    fireEvent.click(screen.getByRole('button', { name: 'More results' }));
    await screen.findByText('2');
    await screen.findByText('30');
    expect(hitLines(screen.getByTestId('search-run'))).toEqual(['2', '10', '20', '30']);
    // "More results" is gone: the older pages were all read; a refresh did not bring it back.
    expect(screen.queryByRole('button', { name: 'More results' })).toBeNull();

    // Hidden, it stops asking.
    Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => 'hidden' });
    try {
      await new Promise((resolve) => setTimeout(resolve, 60));
      const asked = calls.length;
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(calls.length).toBe(asked);
    } finally {
      Object.defineProperty(document, 'visibilityState', {
        configurable: true,
        get: () => 'visible',
      });
    }
  });

  test('a 401 asks for a sign-in (the existing flow)', async () => {
    server.restore();
    server = fakeServer({ authentication: true });
    server.tokens.set('good', 'ana');
    server.cookie = 'good';
    let allowed = false;
    server.routes.set('GET /api/v1/search?q=needle', () =>
      allowed
        ? { status: 200, body: answer([hit({ line: 4 })]) }
        : { status: 401, body: { error: { code: 'TW_UNAUTHENTICATED', message: 'expired' } } },
    );
    window.history.replaceState(null, '', '/ui/search?q=needle');
    render(<App pathname="/ui/search?q=needle" tail={fakeTail().tail} />);
    const dialog = await screen.findByRole('dialog', { name: 'Sign in again' });
    allowed = true;
    fireEvent.change(within(dialog).getByLabelText('Token'), { target: { value: 'good' } });
    fireEvent.click(within(dialog).getByRole('button', { name: 'Sign in' }));
    await screen.findByTestId('hit');
    expect(screen.queryByRole('dialog')).toBeNull();
  });
});

describe('the run view at #L<line>', () => {
  test('brings the line to the middle once loaded, highlights it, stops follow; a new hash moves', async () => {
    const fake = fakeTail();
    window.history.replaceState(null, '', '/ui/pipelines/p/runs/r#L150');
    render(<App pathname="/ui/pipelines/p/runs/r#L150" tail={fake.tail} />);
    const log = await screen.findByTestId('log');
    geometry(log, 4000);
    expect(screen.getByTestId('follow-state').textContent).toBe('Paused');
    act(() => lines(fake, 1, 100));
    act(() => lines(fake, 101, 200));
    // Line 150 is row 149: 2980 px down, 20 px high, in the middle of a 400 px box.
    await waitFor(() => expect(log.scrollTop).toBe(2980 + 10 - 200));
    const target = await waitFor(() => {
      const row = log.querySelector('[data-line="150"]');
      expect(row?.classList.contains('line-target')).toBe(true);
      return row!;
    });
    expect(target.querySelector('.line-text')?.textContent).toBe('line 150');
    expect(log.querySelectorAll('.line-target')).toHaveLength(1);
    expect(screen.getByTestId('follow-state').textContent).toBe('Paused');

    // Another hit's link: the same run view moves to its line.
    const link = document.createElement('a');
    link.href = '/ui/pipelines/p/runs/r#L20';
    link.textContent = 'to line 20';
    screen.getByTestId('log').closest('.app')!.appendChild(link);
    fireEvent.click(link);
    expect(window.location.hash).toBe('#L20');
    await waitFor(() => expect(log.scrollTop).toBe(380 + 10 - 200));
    await waitFor(() =>
      expect(log.querySelector('[data-line="20"]')?.classList.contains('line-target')).toBe(true),
    );
    expect(log.querySelector('[data-line="150"]')?.classList.contains('line-target')).toBeFalsy();
    // The stream was not reopened: the same view, its log kept.
    expect(fake.calls).toHaveLength(1);
    link.remove();
  });

  test('clicking a hit on the search page opens the run view at its line', async () => {
    window.history.replaceState(null, '', '/ui/search?q=needle');
    server.routes.set('GET /api/v1/search?q=needle', () => ({
      status: 200,
      body: answer([hit({ pipeline: 'p', runId: 'r', line: 3, text: 'line 3 needle' })]),
    }));
    const fake = fakeTail();
    render(<App pathname="/ui/search?q=needle" tail={fake.tail} />);
    const row = await screen.findByTestId('hit');
    fireEvent.click(within(row).getByRole('link'));
    expect(window.location.pathname + window.location.hash).toBe('/ui/pipelines/p/runs/r#L3');
    act(() => fake.entry({ kind: 'log', text: 'line 1\nline 2\nline 3 needle\nline 4\n' }));
    await waitFor(() =>
      expect(
        screen
          .getByTestId('log')
          .querySelector('[data-line="3"]')
          ?.classList.contains('line-target'),
      ).toBe(true),
    );
    expect(fake.calls[0]?.target).toEqual({ pipeline: 'p', runId: 'r' });
  });
});
