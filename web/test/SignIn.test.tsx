import { act, fireEvent, render, screen, waitFor, within } from '@testing-library/react';
import { afterEach, describe, expect, test } from 'vitest';
import { TailwaterClientError } from '../../src/client/errors.js';
import { App } from '../src/App.js';
import { AuthProvider } from '../src/auth.js';
import type { SignInReason } from '../src/auth.js';
import { RunsList } from '../src/RunsList.js';
import { useTail } from '../src/stream.js';
import type { TailFn } from '../src/stream.js';
import { fakeServer } from './fake-server.js';
import type { FakeServer } from './fake-server.js';
import { fakeTail } from './fake-tail.js';
import { lines, renderedLines } from './log-helpers.js';

// Signing in (docs/DASHBOARD.md, "Signing in"): the session endpoints faked at fetch(), the
// streams at the SDK's tail().

let server: FakeServer | undefined;
afterEach(() => server?.restore());

/** A server with authentication on, no cookie yet, that takes `good` (alice's) and `other`. */
function authServer(): FakeServer {
  server = fakeServer({ authentication: true });
  server.tokens.set('good', 'alice');
  server.tokens.set('other', null);
  return server;
}

const RUN_PATH = '/ui/pipelines/etl.daily/runs/r1';
const sessionCalls = (s: FakeServer) =>
  s.requests.filter((r) => r.path === '/api/v1/session').map((r) => r.method);
const state = () => screen.getByTestId('connection-state').textContent;

/** Types `token` in the form (of the dialog, when given) and presses Sign in. */
function submit(token: string, within_: HTMLElement = document.body) {
  const field = within(within_).getByLabelText('Token');
  fireEvent.change(field, { target: { value: token } });
  fireEvent.click(within(within_).getByRole('button', { name: 'Sign in' }));
}

/** The app at `path`, signed in as alice through the sign-in page. */
async function signedIn(path: string) {
  const s = authServer();
  const fake = fakeTail();
  const view = render(<App pathname={path} tail={fake.tail} />);
  await screen.findByRole('heading', { name: 'Sign in' });
  submit('good');
  await screen.findByText('Signed in as alice');
  return { server: s, fake, view };
}

describe('without authentication', () => {
  test('asks once and shows the views as ever: no sign-in, no one signed in', async () => {
    server = fakeServer({ authentication: false });
    const fake = fakeTail();
    render(<App pathname="/ui/" tail={fake.tail} />);
    await screen.findByRole('heading', { name: 'Pipelines and runs' });
    expect(sessionCalls(server)).toEqual(['GET']);
    await waitFor(() => expect(fake.calls.map((call) => call.target)).toEqual(['runs']));
    expect(screen.queryByLabelText('Token')).toBeNull();
    expect(screen.queryByRole('button', { name: 'Sign out' })).toBeNull();
    expect(screen.queryByTestId('signed-in-as')).toBeNull();
  });
});

describe('the sign-in page', () => {
  test('stands in for the views without a valid cookie: a labelled password field, focused', async () => {
    const s = authServer();
    const fake = fakeTail();
    render(<App pathname={RUN_PATH} tail={fake.tail} />);
    const heading = await screen.findByRole('heading', { level: 1, name: 'Sign in' });
    const field = screen.getByLabelText('Token');
    expect(field.getAttribute('type')).toBe('password');
    await waitFor(() => expect(document.activeElement).toBe(field));
    expect(heading.closest('section')?.textContent).toContain('tailwater token');
    expect(screen.getByRole('button', { name: 'Sign in' })).toBeTruthy();
    expect(document.title).toBe('Sign in · Tailwater');
    // Nothing is read before the viewer signed in, and no one is shown as signed in.
    expect(fake.calls).toEqual([]);
    expect(screen.queryByTestId('signed-in-as')).toBeNull();
    expect(sessionCalls(s)).toEqual(['GET']);
  });

  test('a refused token shows the server’s message as an alert, and the field keeps the focus', async () => {
    const s = authServer();
    const fake = fakeTail();
    render(<App pathname="/ui/" tail={fake.tail} />);
    await screen.findByRole('heading', { name: 'Sign in' });

    // Nothing typed: said at once, without asking the server.
    submit('   ');
    const alert = screen.getByRole('alert');
    expect(alert.textContent).toBe('Paste a token first.');
    expect(sessionCalls(s)).toEqual(['GET']);

    submit('forged');
    await waitFor(() =>
      expect(screen.getByRole('alert').textContent).toBe(
        'The token is not accepted: its signature does not verify.',
      ),
    );
    expect(s.requests.at(-1)).toMatchObject({
      method: 'POST',
      path: '/api/v1/session',
      body: { token: 'forged' },
    });
    const field = screen.getByLabelText('Token');
    expect(field.getAttribute('aria-invalid')).toBe('true');
    expect(field.getAttribute('aria-describedby')).toBe(screen.getByRole('alert').id);
    expect(document.activeElement).toBe(field);
    expect(screen.getByRole('button', { name: 'Sign in' })).toBeTruthy();
    expect(fake.calls).toEqual([]);
  });

  test('a good token goes on to the page asked for, and the header says who is signed in', async () => {
    const { server: s, fake } = await signedIn(RUN_PATH);
    expect(sessionCalls(s)).toEqual(['GET', 'POST', 'GET']);
    expect(s.cookie).toBe('good');
    expect(screen.getByRole('heading', { level: 1 }).textContent).toBe('etl.daily / r1');
    expect(document.title).toBe('etl.daily / r1 · Tailwater');
    expect(fake.calls.map((call) => call.target)).toEqual([{ pipeline: 'etl.daily', runId: 'r1' }]);
    expect(screen.getByRole('button', { name: 'Sign out' })).toBeTruthy();
  });

  test('a token without a subject reads "Signed in"', async () => {
    authServer();
    render(<App pathname="/ui/" tail={fakeTail().tail} />);
    await screen.findByRole('heading', { name: 'Sign in' });
    submit('other');
    expect((await screen.findByTestId('signed-in-as')).textContent).toBe('Signed in');
  });

  test('an existing cookie signs in without the page', async () => {
    const s = authServer();
    s.cookie = 'good';
    const fake = fakeTail();
    render(<App pathname="/ui/topics/builds" tail={fake.tail} />);
    await screen.findByRole('heading', { name: 'Topic builds' });
    expect(screen.getByTestId('signed-in-as').textContent).toBe('Signed in as alice');
    expect(screen.queryByLabelText('Token')).toBeNull();
    expect(fake.calls).toHaveLength(1);
  });

  test('a token the server took but the browser does not hold is not a sign-in', async () => {
    // E.g. a token already past its exp (within the server's clock allowance): its cookie gets
    // Max-Age=0, so the check that follows is answered 401.
    const s = authServer();
    s.lapsed.add('stale');
    const fake = fakeTail();
    render(<App pathname="/ui/" tail={fake.tail} />);
    await screen.findByRole('heading', { name: 'Sign in' });
    submit('stale');
    await waitFor(() =>
      expect(screen.getByRole('alert').textContent).toMatch(
        /took the token, but this browser is not signed in/,
      ),
    );
    expect(sessionCalls(s)).toEqual(['GET', 'POST', 'GET']);
    expect(screen.getByRole('heading', { level: 1 }).textContent).toBe('Sign in');
    expect(screen.queryByTestId('signed-in-as')).toBeNull();
    expect(fake.calls).toEqual([]);
  });
});

describe('signing out', () => {
  test('Sign out clears the cookie and shows the sign-in page, focused; the view’s stream closes', async () => {
    const { server: s, fake } = await signedIn(RUN_PATH);
    fireEvent.click(screen.getByRole('button', { name: 'Sign out' }));
    await screen.findByRole('heading', { name: 'Sign in' });
    expect(sessionCalls(s).at(-1)).toBe('DELETE');
    expect(s.cookie).toBeNull();
    expect(screen.getByRole('status').textContent).toBe('You signed out.');
    await waitFor(() => expect(document.activeElement).toBe(screen.getByLabelText('Token')));
    expect(screen.queryByRole('button', { name: 'Sign out' })).toBeNull();
    expect(fake.calls[0]?.signal?.aborted).toBe(true);
    // Signing in again opens the page afresh.
    submit('good');
    await screen.findByRole('heading', { name: 'etl.daily / r1' });
    expect(fake.calls).toHaveLength(2);
  });
});

describe('signing in again while a view is open', () => {
  test('a stream ending with tokenExpired opens the dialog over the view, which keeps its state, then resumes from its cursor', async () => {
    const { server: s, fake, view } = await signedIn(RUN_PATH);
    act(() => {
      fake.push({ type: 'open' });
      lines(fake, 1, 3); // seq 1
      lines(fake, 4, 5); // seq 2
    });
    await screen.findByText('line 5');
    const search = screen.getByLabelText('Search the log');
    search.focus();
    fireEvent.change(search, { target: { value: 'line 4' } });

    s.expire('good');
    act(() => fake.push({ type: 'end', end: { reason: 'tokenExpired', lastSeq: 2 } }));
    const dialog = await screen.findByRole('dialog', { name: 'Sign in again' });
    expect(dialog.getAttribute('aria-modal')).toBe('true');
    expect(dialog.textContent).toContain('Your token expired.');
    const field = within(dialog).getByLabelText('Token');
    await waitFor(() => expect(document.activeElement).toBe(field));
    // Behind it: the same view, inert, with its log, its search and its paused stream.
    expect(view.container.querySelector('.app-page')?.hasAttribute('inert')).toBe(true);
    expect(renderedLines(screen.getByTestId('log'))).toEqual([
      'line 1',
      'line 2',
      'line 3',
      'line 4',
      'line 5',
    ]);
    expect((search as HTMLInputElement).value).toBe('line 4');
    expect(state()).toBe('Paused: the token expired; sign in again to resume');
    // It resumes by itself after the sign-in: no Resume button to press before it.
    expect(screen.queryByRole('button', { name: 'Resume' })).toBeNull();
    expect(fake.calls).toHaveLength(1);

    // A refused token keeps the dialog, with the reason.
    submit('forged', dialog);
    await waitFor(() =>
      expect(within(dialog).getByRole('alert').textContent).toMatch(/signature does not verify/),
    );
    expect(fake.calls).toHaveLength(1);

    s.tokens.set('fresh', 'alice');
    submit('fresh', dialog);
    await waitFor(() => expect(screen.queryByRole('dialog')).toBeNull());
    expect(view.container.querySelector('.app-page')?.hasAttribute('inert')).toBe(false);
    // The focus is back where it was, and the stream reopens after the last entry seen.
    await waitFor(() => expect(document.activeElement).toBe(search));
    await waitFor(() => expect(fake.calls).toHaveLength(2));
    expect(fake.calls[1]).toMatchObject({
      target: { pipeline: 'etl.daily', runId: 'r1' },
      after: '2',
    });
    act(() => {
      fake.push({ type: 'open' });
      lines(fake, 6, 7);
    });
    await screen.findByText('line 7');
    expect(state()).toBe('Live');
    expect(renderedLines(screen.getByTestId('log'))).toEqual([
      'line 1',
      'line 2',
      'line 3',
      'line 4',
      'line 5',
      'line 6',
      'line 7',
    ]);
  });

  test('a stream refused with 401 (the cookie gone) asks again and resumes after the sign-in', async () => {
    const { server: s, fake } = await signedIn('/ui/topics/builds');
    act(() => {
      fake.push({ type: 'open' });
      fake.entry({ kind: 'build', data: { n: 1 } });
    });
    await screen.findByText('n: 1');
    s.cookie = null;
    act(() =>
      fake.fail(new TailwaterClientError('This server needs a token.', 401, 'TW_UNAUTHENTICATED')),
    );
    const dialog = await screen.findByRole('dialog', { name: 'Sign in again' });
    expect(dialog.textContent).toContain('no longer takes your sign-in');
    expect(state()).toBe('Paused: not signed in; sign in again to resume');
    // The view's events stay.
    expect(screen.getByText('n: 1')).toBeTruthy();
    submit('good', dialog);
    await waitFor(() => expect(fake.calls).toHaveLength(2));
    expect(fake.calls[1]).toMatchObject({ target: { topic: 'builds' }, after: '1' });
    expect(screen.queryByRole('dialog')).toBeNull();
  });

  test('a stream still refused after signing in asks again, once, without looping', async () => {
    const { fake } = await signedIn(RUN_PATH);
    const refuse = () =>
      act(() => fake.fail(new TailwaterClientError('expired', 401, 'TW_UNAUTHENTICATED')));
    refuse();
    submit('good', await screen.findByRole('dialog'));
    await waitFor(() => expect(fake.calls).toHaveLength(2));
    refuse();
    expect(await screen.findByRole('dialog')).toBeTruthy();
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(fake.calls).toHaveLength(2);
  });

  test('a REST call answered 401 opens the dialog too, and is made again after the sign-in', async () => {
    const s = authServer();
    s.cookie = 'good';
    let runs = 0;
    s.routes.set('GET /api/v1/pipelines/etl.daily/runs/latest', (cookie) => {
      runs += 1;
      if (cookie !== 'fresh') return { status: 401, body: { error: { message: 'expired' } } };
      return { status: 200, body: { pipeline: 'etl.daily', runId: 'r5' } };
    });
    const fake = fakeTail();
    render(<App pathname="/ui/pipelines/etl.daily/runs/latest" tail={fake.tail} />);
    const dialog = await screen.findByRole('dialog', { name: 'Sign in again' });
    expect(screen.getByText('Waiting for you to sign in again…')).toBeTruthy();
    expect(runs).toBe(1);
    expect(fake.calls).toEqual([]);
    s.tokens.set('fresh', 'alice');
    submit('fresh', dialog);
    await waitFor(() =>
      expect(screen.getByRole('heading', { level: 1 }).textContent).toBe('etl.daily / r5 (latest)'),
    );
    expect(runs).toBe(2);
    expect(fake.calls.map((call) => call.target)).toEqual([{ pipeline: 'etl.daily', runId: 'r5' }]);
  });
});

describe('not allowed (403)', () => {
  test('a run’s stream refused with 403 says so in the view, naming the pipeline', async () => {
    const { fake } = await signedIn(RUN_PATH);
    act(() =>
      fake.fail(
        new TailwaterClientError(
          'This token may not read pipeline:etl.daily.',
          403,
          'TW_FORBIDDEN',
        ),
      ),
    );
    const alert = await screen.findByTestId('not-allowed');
    expect(alert.getAttribute('role')).toBe('alert');
    expect(within(alert).getByRole('heading').textContent).toBe('You are not allowed to see this');
    expect(alert.textContent).toContain('may not read pipeline etl.daily');
    expect(alert.textContent).toContain('This token may not read pipeline:etl.daily.');
    // Not a generic failure: no log, no Resume, no sign-in dialog.
    expect(screen.queryByTestId('log')).toBeNull();
    expect(screen.queryByRole('button', { name: 'Resume' })).toBeNull();
    expect(screen.queryByRole('dialog')).toBeNull();
    expect(state()).toMatch(/^Not allowed:/);
    expect(screen.queryByText(/Disconnected/)).toBeNull();
  });

  test('a topic refused with 403 names the topic', async () => {
    const { fake } = await signedIn('/ui/topics/secrets');
    act(() => fake.fail(new TailwaterClientError('This token may not read topic:secrets.', 403)));
    const alert = await screen.findByTestId('not-allowed');
    expect(alert.textContent).toContain('may not read topic secrets');
  });

  test('runs/latest refused with 403 names the pipeline', async () => {
    const s = authServer();
    s.cookie = 'good';
    s.routes.set('GET /api/v1/pipelines/ml.train/runs/latest', () => ({
      status: 403,
      body: {
        error: { code: 'TW_FORBIDDEN', message: 'This token may not read pipeline:ml.train.' },
      },
    }));
    render(<App pathname="/ui/pipelines/ml.train/runs/latest" tail={fakeTail().tail} />);
    const alert = await screen.findByTestId('not-allowed');
    expect(alert.textContent).toContain('may not read pipeline ml.train');
    expect(screen.queryByRole('dialog')).toBeNull();
  });
});

describe('what asks for a sign-in', () => {
  function Probe({ tail }: { tail: TailFn }) {
    const { state } = useTail(tail, 'k', { target: { topic: 't' } }, () => {});
    return <span data-testid="phase">{state.phase}</span>;
  }

  test('a stream opened before the latest sign-in and refused after it retries, without asking', async () => {
    const asked: SignInReason[] = [];
    const signInNeeded = (reason: SignInReason) => asked.push(reason);
    const fake = fakeTail();
    const { rerender } = render(
      <AuthProvider value={{ signInNeeded, signIns: 0 }}>
        <Probe tail={fake.tail} />
      </AuthProvider>,
    );
    act(() => fake.entry({ kind: 'k' }));
    await waitFor(() => expect(screen.getByTestId('phase').textContent).toBe('live'));
    // Signed in again elsewhere (another view's stream expired first) …
    rerender(
      <AuthProvider value={{ signInNeeded, signIns: 1 }}>
        <Probe tail={fake.tail} />
      </AuthProvider>,
    );
    // … then this stream, opened with the old cookie, is refused: it opens again at once.
    act(() => fake.fail(new TailwaterClientError('expired', 401)));
    await waitFor(() => expect(fake.calls).toHaveLength(2));
    expect(fake.calls[1]?.after).toBe('1');
    expect(asked).toEqual([]);
    // Refused again with the new cookie: now it asks.
    act(() => fake.fail(new TailwaterClientError('expired', 401)));
    await waitFor(() => expect(asked).toEqual(['unauthenticated']));
    expect(screen.getByTestId('phase').textContent).toBe('signedOut');
  });

  test('the runs list’s refresh refused with 401 asks for a sign-in', async () => {
    const asked: SignInReason[] = [];
    const fake = fakeTail();
    const listRunning = () => Promise.reject(new TailwaterClientError('expired', 401));
    const running = {
      id: 'u1',
      pipeline: 'etl.daily',
      runId: 'r1',
      status: 'running' as const,
      cancelRequested: false,
      createdAt: '2026-01-01T00:00:00.000Z',
      startedAt: '2026-01-01T00:00:00.000Z',
      endedAt: null,
      lastSeq: 1,
      logBytes: 0,
      meta: {},
    };
    const listPipelines = () =>
      Promise.resolve({ pipelines: [{ fqn: 'etl.daily', id: 'p', runs: 1, lastRun: running }] });
    render(
      <AuthProvider value={{ signInNeeded: (reason) => asked.push(reason), signIns: 0 }}>
        <RunsList
          tail={fake.tail}
          listRunning={listRunning}
          listPipelines={listPipelines}
          refreshMs={20}
        />
      </AuthProvider>,
    );
    await waitFor(() => expect(asked[0]).toBe('unauthenticated'));
  });

  test('the pipelines listing refused with 401 asks for a sign-in, and is asked again after it', async () => {
    const asked: SignInReason[] = [];
    const fake = fakeTail();
    let refuse = true;
    let calls = 0;
    const listPipelines = () => {
      calls += 1;
      return refuse
        ? Promise.reject(new TailwaterClientError('expired', 401))
        : Promise.resolve({ pipelines: [{ fqn: 'etl.after', id: 'p', runs: 0, lastRun: null }] });
    };
    const view = (signIns: number) => (
      <AuthProvider value={{ signInNeeded: (reason) => asked.push(reason), signIns }}>
        <RunsList tail={fake.tail} listPipelines={listPipelines} />
      </AuthProvider>
    );
    const { rerender } = render(view(0));
    await waitFor(() => expect(asked).toEqual(['unauthenticated']));
    refuse = false;
    rerender(view(1));
    expect(await screen.findByRole('link', { name: 'etl.after' })).toBeTruthy();
    expect(calls).toBe(2);
  });
});
