/**
 * Sign-in against a Cognito user pool from the browser: the user pool's public JSON API
 * (`InitiateAuth`, `RespondToAuthChallenge`, `RevokeToken`), called with `fetch`. These calls
 * take no AWS credentials; the endpoint comes from `/config.json`, which is real Cognito when
 * deployed and the emulator's address locally.
 *
 * The flow is SRP (`USER_SRP_AUTH`): the password never leaves the browser; the page proves it
 * knows it. The SRP exchange is amazon-cognito-identity-js's (`CognitoUser.authenticateUser`),
 * sent through this client's own `call`, so it has one transport, one error handling and the same
 * test double as the other calls. The local emulator checks SRP proofs as Cognito does
 * (scripts/lib/moto_server.py), so the same page code is tested against a wrong password
 * locally (docs/web.md).
 */
import {
  AuthenticationDetails,
  CognitoAccessToken,
  CognitoUser,
  CognitoUserPool,
  type ICognitoStorage,
} from 'amazon-cognito-identity-js';

export interface CognitoConfig {
  region: string;
  userPoolId: string;
  clientId: string;
  /** e.g. `https://cognito-idp.eu-west-1.amazonaws.com/`, or the emulator's URL. */
  endpoint: string;
}

export interface Tokens {
  accessToken: string;
  idToken?: string;
  /** Absent on a refresh: Cognito keeps the one it was refreshed with. */
  refreshToken?: string;
  /** Seconds the access token is valid from now. */
  expiresIn: number;
}

/**
 * What a sign-in returns: tokens, or the next step: a new password to choose (an invited user's
 * first sign-in), the code of the person's authenticator app (`cognitoMfa`), or setting one up
 * (MFA required and none set up yet).
 */
export type SignInResult =
  | { kind: 'signed-in'; tokens: Tokens }
  | { kind: 'new-password'; session: string; username: string }
  | { kind: 'mfa-code'; session: string; username: string }
  | { kind: 'mfa-setup'; session: string; username: string };

export class CognitoError extends Error {
  constructor(
    message: string,
    readonly code: string,
  ) {
    super(message);
  }
}

type Fetch = typeof fetch;

/** Cognito's error types in words for the person at the sign-in form. */
export function explainCognito(code: string, said: string): string {
  switch (code) {
    case 'NotAuthorizedException':
      if (/revoked|expired|Invalid Refresh Token/i.test(said)) return 'Your sign-in has expired: sign in again.';
      if (/disabled/i.test(said)) return 'This account is disabled.';
      return 'Wrong email or password.';
    case 'InvalidParameterException':
      if (/USER_SRP_AUTH/i.test(said))
        return 'This user pool does not allow SRP sign-in for the web client (ALLOW_USER_SRP_AUTH).';
      return said || 'Sign-in failed (InvalidParameterException).';
    case 'UserNotFoundException':
      return 'Wrong email or password.';
    case 'UserNotConfirmedException':
      return 'This account is not confirmed yet.';
    case 'PasswordResetRequiredException':
      return 'An administrator reset your password: ask them for a new temporary one.';
    case 'InvalidPasswordException':
      return `That password is not allowed: ${said.replace(/^Password does not conform to policy: /, '')}`;
    case 'TooManyRequestsException':
    case 'LimitExceededException':
      return 'Too many attempts: wait a moment and try again.';
    case 'CodeMismatchException':
    case 'EnableSoftwareTokenMFAException':
      return 'That code is not right: enter the one your authenticator app shows now.';
    case 'ExpiredCodeException':
      return 'The sign-in took too long: start again.';
    default:
      return said || `Sign-in failed (${code}).`;
  }
}

export class CognitoClient {
  constructor(
    readonly config: CognitoConfig,
    private readonly fetchFn: Fetch = (...a) => fetch(...a),
  ) {}

  private async call<T>(action: string, body: Record<string, unknown>): Promise<T> {
    let resp: Response;
    try {
      resp = await this.fetchFn(this.config.endpoint, {
        method: 'POST',
        headers: {
          'content-type': 'application/x-amz-json-1.1',
          'x-amz-target': `AWSCognitoIdentityProviderService.${action}`,
        },
        body: JSON.stringify(body),
      });
    } catch {
      throw new CognitoError('The sign-in service cannot be reached: you may be offline.', 'offline');
    }
    const text = await resp.text();
    let parsed: Record<string, unknown> = {};
    try {
      parsed = text ? (JSON.parse(text) as Record<string, unknown>) : {};
    } catch {
      parsed = {};
    }
    if (!resp.ok) {
      // `__type` is "NotAuthorizedException" or "com.amazon…#NotAuthorizedException".
      const type =
        String(parsed.__type ?? `http-${resp.status}`)
          .split('#')
          .pop() ?? '';
      const said = String(parsed.message ?? parsed.Message ?? '');
      throw new CognitoError(explainCognito(type, said), type);
    }
    return parsed as T;
  }

  private static tokens(r: AuthAnswer): Tokens {
    const a = r.AuthenticationResult;
    if (!a?.AccessToken) throw new CognitoError('The sign-in service answered without a token.', 'no-token');
    return {
      accessToken: a.AccessToken,
      idToken: a.IdToken,
      refreshToken: a.RefreshToken,
      expiresIn: Number(a.ExpiresIn ?? 3600),
    };
  }

  private static result(r: AuthAnswer, username: string): SignInResult {
    const next = {
      session: String(r.Session ?? ''),
      username: r.ChallengeParameters?.USER_ID_FOR_SRP ?? r.ChallengeParameters?.USERNAME ?? username,
    };
    if (r.ChallengeName === 'NEW_PASSWORD_REQUIRED') return { kind: 'new-password', ...next };
    if (r.ChallengeName === 'SOFTWARE_TOKEN_MFA') return { kind: 'mfa-code', ...next };
    // Cognito lists what may be set up as a JSON string; the page sets up an authenticator app.
    if (r.ChallengeName === 'MFA_SETUP' && JSON.stringify(r.ChallengeParameters ?? {}).includes('SOFTWARE_TOKEN_MFA'))
      return { kind: 'mfa-setup', ...next };
    if (r.ChallengeName)
      throw new CognitoError(
        `This account needs a sign-in step the page does not support yet (${r.ChallengeName}).`,
        r.ChallengeName,
      );
    return { kind: 'signed-in', tokens: CognitoClient.tokens(r) };
  }

  /**
   * Signs in with SRP. amazon-cognito-identity-js computes `A`, the password claim and its
   * timestamp; its two requests (`InitiateAuth`, `RespondToAuthChallenge`) go through `call`.
   * Its storage is a throwaway one: the tokens are kept by session.ts, not by the library.
   */
  async signIn(email: string, password: string): Promise<SignInResult> {
    const storage = new MemoryStorage();
    const pool = new CognitoUserPool({
      UserPoolId: this.config.userPoolId,
      ClientId: this.config.clientId,
      endpoint: this.config.endpoint,
      Storage: storage,
      AdvancedSecurityDataCollectionFlag: false,
    });
    return new Promise<SignInResult>((resolve, reject) => {
      let last: AuthAnswer = {};
      // The library's requests, sent by `call` (its `Client.request` has this shape).
      const transport: LibraryTransport = {
        request: (operation, params, callback) => {
          this.call<AuthAnswer>(operation, params)
            .then(
              (answer) => {
                last = answer;
                callback(null, answer);
              },
              (e: unknown) => callback(e),
            )
            .catch(reject);
        },
      };
      (pool as unknown as { client: LibraryTransport }).client = transport;
      const user = new CognitoUser({ Username: email, Pool: pool, Storage: storage });
      user.setAuthenticationFlowType('USER_SRP_AUTH');
      const settle = () => {
        try {
          resolve(CognitoClient.result(last, user.getUsername()));
        } catch (e) {
          reject(e);
        }
      };
      user.authenticateUser(new AuthenticationDetails({ Username: email, Password: password }), {
        onSuccess: settle,
        newPasswordRequired: settle,
        mfaRequired: settle,
        totpRequired: settle,
        mfaSetup: settle,
        selectMFAType: settle,
        customChallenge: settle,
        onFailure: (e: unknown) =>
          reject(e instanceof CognitoError ? e : new CognitoError(explainCognito('srp', errorMessage(e)), 'srp')),
      });
    });
  }

  /** Answers NEW_PASSWORD_REQUIRED: the invited user's own password replaces the temporary one. */
  async completeNewPassword(session: string, username: string, newPassword: string): Promise<SignInResult> {
    const r = await this.call<AuthAnswer>('RespondToAuthChallenge', {
      ChallengeName: 'NEW_PASSWORD_REQUIRED',
      ClientId: this.config.clientId,
      Session: session,
      ChallengeResponses: { USERNAME: username, NEW_PASSWORD: newPassword },
    });
    return CognitoClient.result(r, username);
  }

  /** Answers SOFTWARE_TOKEN_MFA with the authenticator app's code. */
  async answerMfa(session: string, username: string, code: string): Promise<SignInResult> {
    const r = await this.call<AuthAnswer>('RespondToAuthChallenge', {
      ChallengeName: 'SOFTWARE_TOKEN_MFA',
      ClientId: this.config.clientId,
      Session: session,
      ChallengeResponses: { USERNAME: username, SOFTWARE_TOKEN_MFA_CODE: code.trim() },
    });
    return CognitoClient.result(r, username);
  }

  /** MFA_SETUP, first step: the key of a new authenticator app (`AssociateSoftwareToken`). */
  async startMfaSetup(session: string): Promise<{ secret: string; session: string }> {
    const r = await this.call<{ SecretCode?: string; Session?: string }>('AssociateSoftwareToken', {
      Session: session,
    });
    if (!r.SecretCode) throw new CognitoError('The sign-in service answered without a key.', 'no-key');
    return { secret: r.SecretCode, session: r.Session ?? session };
  }

  /** MFA_SETUP, second step: the app's first code (`VerifySoftwareToken`), then the challenge. */
  async finishMfaSetup(session: string, username: string, code: string): Promise<SignInResult> {
    const v = await this.call<{ Status?: string; Session?: string }>('VerifySoftwareToken', {
      Session: session,
      UserCode: code.trim(),
      FriendlyDeviceName: 'sheetlog',
    });
    if (v.Status !== 'SUCCESS')
      throw new CognitoError(explainCognito('EnableSoftwareTokenMFAException', ''), 'EnableSoftwareTokenMFAException');
    const r = await this.call<AuthAnswer>('RespondToAuthChallenge', {
      ChallengeName: 'MFA_SETUP',
      ClientId: this.config.clientId,
      Session: v.Session ?? session,
      ChallengeResponses: { USERNAME: username },
    });
    return CognitoClient.result(r, username);
  }

  async refresh(refreshToken: string): Promise<Tokens> {
    const r = await this.call<AuthAnswer>('InitiateAuth', {
      AuthFlow: 'REFRESH_TOKEN_AUTH',
      ClientId: this.config.clientId,
      AuthParameters: { REFRESH_TOKEN: refreshToken },
    });
    return CognitoClient.tokens(r);
  }

  /**
   * Ends this browser's sign-in: revokes the refresh token (and the access tokens issued from
   * it). Where RevokeToken is missing (the emulator), signs the user out everywhere instead.
   */
  async revoke(refreshToken: string, accessToken: string | undefined): Promise<void> {
    try {
      await this.call('RevokeToken', { ClientId: this.config.clientId, Token: refreshToken });
    } catch (e) {
      if (!accessToken) throw e;
      await this.call('GlobalSignOut', { AccessToken: accessToken });
    }
  }
}

/** What amazon-cognito-identity-js asks of its transport (`Client.request`). */
interface LibraryTransport {
  request(operation: string, params: Record<string, unknown>, callback: (err: unknown, data?: unknown) => void): void;
}

/** The library's storage, for one sign-in: it caches tokens there, which the page does not keep. */
class MemoryStorage implements ICognitoStorage {
  private items = new Map<string, string>();
  setItem(key: string, value: string): void {
    this.items.set(key, value);
  }
  getItem(key: string): string | null {
    return this.items.get(key) ?? null;
  }
  removeItem(key: string): void {
    this.items.delete(key);
  }
  clear(): void {
    this.items.clear();
  }
}

function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

interface AuthAnswer {
  ChallengeName?: string;
  Session?: string;
  ChallengeParameters?: Record<string, string>;
  AuthenticationResult?: {
    AccessToken?: string;
    IdToken?: string;
    RefreshToken?: string;
    ExpiresIn?: number;
  };
}

/**
 * The claims of a JWT, unverified (the API verifies; the page only reads `exp`, `sub`, `username`):
 * amazon-cognito-identity-js's own decoder, `{}` for anything that is not a JWT.
 */
export function claims(jwt: string): Record<string, unknown> {
  return new CognitoAccessToken({ AccessToken: jwt }).decodePayload();
}
