import {
  createContext,
  useContext,
  useEffect,
  useEffectEvent,
  useId,
  useLayoutEffect,
  useRef,
  useState,
} from 'react';
import type { FormEvent } from 'react';

/** Why the viewer is asked to sign in again while a view is open. */
export type SignInReason = 'tokenExpired' | 'unauthenticated';

/** What a view needs of the sign-in: to ask for it, and to know when it happened again. */
export interface Auth {
  /**
   * A request or a stream was answered 401, or a stream ended with `tokenExpired`: the app asks
   * for a token again (without unmounting the view).
   */
  signInNeeded(reason: SignInReason): void;
  /** How often the viewer signed in since the app started: what waits for it, resumes when it grows. */
  signIns: number;
}

const AuthContext = createContext<Auth>({ signInNeeded: () => {}, signIns: 0 });

export const AuthProvider = AuthContext.Provider;

export function useAuth(): Auth {
  return useContext(AuthContext);
}

/**
 * Calls `retry` when the viewer signs in again while `waiting` (a stream paused by an expired
 * token, a request refused with 401 or 403).
 */
export function useRetryAfterSignIn(waiting: boolean, retry: () => void): void {
  const { signIns } = useAuth();
  const seen = useRef(signIns);
  const onSignIn = useEffectEvent(retry);
  useEffect(() => {
    if (signIns === seen.current) return;
    seen.current = signIns;
    if (waiting) onSignIn();
  }, [signIns, waiting]);
}

/** Signs in with a token; resolves to the message to show, or null once signed in. */
export type SignIn = (token: string) => Promise<string | null>;

/**
 * The token field (password-type, so it is not shown or kept by the browser's autofill), its
 * Sign in button, and the server's answer when it refuses the token, announced as an alert. The
 * field has the focus when the form appears and again after a refusal.
 */
export function SignInForm({ onSignIn }: { onSignIn: SignIn }) {
  const id = useId();
  const [token, setToken] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const input = useRef<HTMLInputElement>(null);
  useLayoutEffect(() => input.current?.focus(), []);

  const refuse = (message: string) => {
    setError(message);
    input.current?.focus();
    input.current?.select();
  };
  const onSubmit = async (event: FormEvent<HTMLFormElement>) => {
    event.preventDefault();
    if (busy) return;
    const value = token.trim();
    if (value === '') {
      refuse('Paste a token first.');
      return;
    }
    setBusy(true);
    setError(null);
    const problem = await onSignIn(value);
    // Signed in: the form is gone.
    if (problem === null) return;
    setBusy(false);
    refuse(problem);
  };

  return (
    <form className="sign-in-form" onSubmit={(event) => void onSubmit(event)} noValidate>
      <label htmlFor={`${id}-token`}>Token</label>
      <div className="sign-in-row">
        <input
          ref={input}
          id={`${id}-token`}
          name="token"
          type="password"
          autoComplete="off"
          spellCheck={false}
          value={token}
          onChange={(event) => setToken(event.target.value)}
          aria-invalid={error === null ? undefined : true}
          aria-describedby={`${id}-error`}
        />
        <button type="submit" disabled={busy}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
      </div>
      {/* Present from the start, so that screen readers announce what is put in it. */}
      <p id={`${id}-error`} className="sign-in-error" role="alert">
        {error}
      </p>
    </form>
  );
}

function Explanation() {
  return (
    <p>
      This server needs a token. Paste one made by <code>tailwater token</code> (for example{' '}
      <code>tailwater token --read &apos;pipeline:*&apos; --ttl 3600</code>). The server keeps it in
      a cookie this page’s scripts cannot read, until it expires or you sign out.
    </p>
  );
}

/** The sign-in page: what the app shows instead of its views until the viewer signs in. */
export function SignInPage({ onSignIn, notice }: { onSignIn: SignIn; notice?: string | null }) {
  return (
    <section className="sign-in" aria-labelledby="sign-in-title">
      <h1 id="sign-in-title">Sign in</h1>
      {notice ? <p role="status">{notice}</p> : null}
      <Explanation />
      <SignInForm onSignIn={onSignIn} />
    </section>
  );
}

/**
 * Signing in again over a view that stays as it is (the rest of the page is inert meanwhile):
 * its streams wait and resume from their cursor once the viewer is signed in. Gives the focus
 * back to where it was when it goes.
 */
export function SignInDialog({ reason, onSignIn }: { reason: SignInReason; onSignIn: SignIn }) {
  const id = useId();
  // Where the focus was as the dialog opened: read while rendering, before the field takes it.
  const [previous] = useState(() => document.activeElement);
  useEffect(
    () => () => {
      if (previous instanceof HTMLElement && previous.isConnected) previous.focus();
    },
    [previous],
  );
  return (
    <div className="dialog-backdrop">
      <div
        className="dialog"
        role="dialog"
        aria-modal="true"
        aria-labelledby={`${id}-title`}
        aria-describedby={`${id}-why`}
      >
        <h2 id={`${id}-title`}>Sign in again</h2>
        <p id={`${id}-why`}>
          {reason === 'tokenExpired'
            ? 'Your token expired.'
            : 'The server no longer takes your sign-in (the token expired, or you signed out elsewhere).'}{' '}
          Sign in with a token to carry on: this page stays as it is, and its streams resume where
          they stopped.
        </p>
        <Explanation />
        <SignInForm onSignIn={onSignIn} />
      </div>
    </div>
  );
}

/**
 * What a view shows when the server answered 403: the token is valid but may not read `what`
 * (`pipeline etl.daily`, `topic iceberg`).
 */
export function NotAllowed({ what, detail }: { what: string; detail?: string | undefined }) {
  return (
    <div className="not-allowed" role="alert" data-testid="not-allowed">
      <h2>You are not allowed to see this</h2>
      <p>
        The token you signed in with may not read {what}.
        {detail ? ` The server said: ${detail}` : null}
      </p>
      <p>Ask for a token that may read it, or sign out and sign in with another.</p>
    </div>
  );
}
