/**
 * The signed-in person in `cognito` mode. The access token (what the API gets, as `Authorization:
 * Bearer`) lives only in memory; the refresh token is kept in `localStorage` under
 * `sheetlog.cognito.<clientId>`, so a reload or a new tab signs in without the password. The
 * access token is refreshed a few minutes before it expires, after the computer wakes, and once
 * when the API answers 401. Why the refresh token is kept there, and what that risks: docs/web.md.
 */
import { type CognitoClient, CognitoError, claims, type SignInResult, type Tokens } from './cognito';

/** Refresh this long before the access token expires (or at half its life, if that is shorter). */
export const REFRESH_MARGIN_MS = 5 * 60_000;

export interface Clock {
  now(): number;
  setTimeout(f: () => void, ms: number): unknown;
  clearTimeout(id: unknown): void;
}

const realClock: Clock = {
  now: () => Date.now(),
  setTimeout: (f, ms) => setTimeout(f, ms),
  clearTimeout: (id) => clearTimeout(id as ReturnType<typeof setTimeout>),
};

interface Stored {
  refreshToken: string;
  email: string;
}

/** When to refresh a token that expires at `expMs` and was issued at `issuedMs`. */
export function refreshAt(issuedMs: number, expMs: number): number {
  const life = Math.max(0, expMs - issuedMs);
  return expMs - Math.min(REFRESH_MARGIN_MS, life / 2);
}

export class Session {
  private access: { token: string; issued: number; exp: number; sub: string } | undefined;
  private refreshToken: string | undefined;
  private timer: unknown;
  private refreshing: Promise<boolean> | undefined;
  email: string | undefined;
  /** Called when the person is signed in or out (a refresh that failed signs out). */
  onChange: (signedIn: boolean) => void = () => {};
  /** Called with every new access token. */
  onToken: (token: string) => void = () => {};

  constructor(
    readonly client: CognitoClient,
    private readonly storage: Storage,
    private readonly clock: Clock = realClock,
  ) {}

  private get key(): string {
    return `sheetlog.cognito.${this.client.config.clientId}`;
  }

  get signedIn(): boolean {
    return this.access !== undefined;
  }
  accessToken(): string | undefined {
    return this.access?.token;
  }
  userId(): string | undefined {
    return this.access?.sub;
  }
  /** Milliseconds since the epoch when the access token expires. */
  expiresAt(): number | undefined {
    return this.access?.exp;
  }

  private adopt(t: Tokens, email: string | undefined): void {
    const now = this.clock.now();
    const c = claims(t.accessToken);
    const exp = typeof c.exp === 'number' ? c.exp * 1000 : now + t.expiresIn * 1000;
    this.access = { token: t.accessToken, issued: now, exp, sub: String(c.sub ?? '') };
    if (t.refreshToken) this.refreshToken = t.refreshToken;
    if (email) this.email = email;
    if (this.refreshToken)
      this.storage.setItem(this.key, JSON.stringify({ refreshToken: this.refreshToken, email: this.email ?? '' }));
    this.schedule();
    this.onToken(t.accessToken);
  }

  private schedule(): void {
    this.clock.clearTimeout(this.timer);
    if (!this.access) return;
    const delay = Math.max(0, refreshAt(this.access.issued, this.access.exp) - this.clock.now());
    this.timer = this.clock.setTimeout(() => void this.refresh(), delay);
  }

  /** Signs in with the refresh token this browser kept, if any. False: the form is needed. */
  async restore(): Promise<boolean> {
    let stored: Stored | undefined;
    try {
      stored = JSON.parse(this.storage.getItem(this.key) ?? 'null') as Stored | undefined;
    } catch {
      stored = undefined;
    }
    if (!stored?.refreshToken) return false;
    this.refreshToken = stored.refreshToken;
    this.email = stored.email || undefined;
    return this.refresh();
  }

  async signIn(email: string, password: string): Promise<SignInResult> {
    const r = await this.client.signIn(email.trim(), password);
    if (r.kind === 'signed-in') {
      this.adopt(r.tokens, email.trim());
      this.onChange(true);
    }
    return r;
  }

  /** Answers an MFA challenge (`mfa-code`) with the authenticator app's code. */
  async answerMfa(session: string, username: string, email: string, code: string): Promise<SignInResult> {
    return this.settle(await this.client.answerMfa(session, username, code), email);
  }

  /** Starts setting up an authenticator app (`mfa-setup`): the key to add to it. */
  startMfaSetup(session: string): Promise<{ secret: string; session: string }> {
    return this.client.startMfaSetup(session);
  }

  /** Finishes setting up the app with its first code, and signs in. */
  async finishMfaSetup(session: string, username: string, email: string, code: string): Promise<SignInResult> {
    return this.settle(await this.client.finishMfaSetup(session, username, code), email);
  }

  private settle(r: SignInResult, email: string): SignInResult {
    if (r.kind === 'signed-in') {
      this.adopt(r.tokens, email.trim());
      this.onChange(true);
    }
    return r;
  }

  async completeNewPassword(
    session: string,
    username: string,
    email: string,
    newPassword: string,
  ): Promise<SignInResult> {
    const r = await this.client.completeNewPassword(session, username, newPassword);
    if (r.kind === 'signed-in') {
      this.adopt(r.tokens, email.trim());
      this.onChange(true);
    }
    return r;
  }

  /**
   * A new access token from the refresh token. Concurrent callers share one request. A refresh
   * token that Cognito refuses signs the person out; a network failure keeps the session and
   * tries again in 30 seconds.
   */
  refresh(): Promise<boolean> {
    if (this.refreshing) return this.refreshing;
    const token = this.refreshToken;
    if (!token) return Promise.resolve(false);
    this.refreshing = this.client
      .refresh(token)
      .then((t) => {
        const was = this.signedIn;
        this.adopt(t, undefined);
        if (!was) this.onChange(true);
        return true;
      })
      .catch((e: unknown) => {
        if (e instanceof CognitoError && e.code === 'offline') {
          this.clock.clearTimeout(this.timer);
          this.timer = this.clock.setTimeout(() => void this.refresh(), 30_000);
          return this.signedIn;
        }
        this.forget();
        return false;
      })
      .finally(() => {
        this.refreshing = undefined;
      });
    return this.refreshing;
  }

  /** Refreshes now if the token is due (a timer can be late after the computer slept). */
  async ensureFresh(): Promise<void> {
    if (this.access && this.clock.now() >= refreshAt(this.access.issued, this.access.exp)) await this.refresh();
  }

  private forget(): void {
    const was = this.signedIn;
    this.clock.clearTimeout(this.timer);
    this.access = undefined;
    this.refreshToken = undefined;
    this.storage.removeItem(this.key);
    if (was) this.onChange(false);
  }

  /** Revokes this browser's refresh token at Cognito and forgets the tokens. */
  async signOut(): Promise<void> {
    const refresh = this.refreshToken;
    const access = this.access?.token;
    this.forget();
    if (refresh) await this.client.revoke(refresh, access).catch(() => {});
  }
}
