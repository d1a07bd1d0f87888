/**
 * Sign-in against a Cognito user pool from the browser: the user pool's public JSON API
 * (`InitiateAuth`, `RespondToAuthChallenge`, `RevokeToken`), called with `fetch`. These calls
 * take no AWS credentials, so no SDK is needed; the endpoint comes from `/config.json`, which is
 * real Cognito when deployed and the emulator's address locally.
 *
 * The flow is `USER_PASSWORD_AUTH` (the password goes to Cognito over TLS, never to the API).
 * SRP (`USER_SRP_AUTH`) would keep the password off the wire, but the local emulator does not
 * check SRP proofs at all (any password signs in), so the same page code could never be tested
 * locally against a wrong password; `USER_PASSWORD_AUTH` is checked by both (docs/web.md).
 */

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

/** What a sign-in returns: tokens, or a new password to choose (an invited user's first sign-in). */
export type SignInResult =
  | { kind: 'signed-in'; tokens: Tokens }
  | { kind: 'new-password'; session: string; username: string };

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
      if (/USER_PASSWORD_AUTH/i.test(said))
        return 'This user pool does not allow password sign-in for the web client (ALLOW_USER_PASSWORD_AUTH).';
      return 'Wrong email or password.';
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
    if (r.ChallengeName === 'NEW_PASSWORD_REQUIRED')
      return {
        kind: 'new-password',
        session: String(r.Session ?? ''),
        username: r.ChallengeParameters?.USER_ID_FOR_SRP ?? r.ChallengeParameters?.USERNAME ?? username,
      };
    if (r.ChallengeName)
      throw new CognitoError(
        `This account needs a sign-in step the page does not support yet (${r.ChallengeName}).`,
        r.ChallengeName,
      );
    return { kind: 'signed-in', tokens: CognitoClient.tokens(r) };
  }

  async signIn(email: string, password: string): Promise<SignInResult> {
    const r = await this.call<AuthAnswer>('InitiateAuth', {
      AuthFlow: 'USER_PASSWORD_AUTH',
      ClientId: this.config.clientId,
      AuthParameters: { USERNAME: email, PASSWORD: password },
    });
    return CognitoClient.result(r, email);
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

/** The claims of a JWT, unverified (the API verifies; the page only reads `exp`, `sub`, `username`). */
export function claims(jwt: string): Record<string, unknown> {
  const part = jwt.split('.')[1];
  if (!part) return {};
  try {
    const b64 = part
      .replace(/-/g, '+')
      .replace(/_/g, '/')
      .padEnd(Math.ceil(part.length / 4) * 4, '=');
    const bin = atob(b64);
    const bytes = Uint8Array.from(bin, (c) => c.charCodeAt(0));
    return JSON.parse(new TextDecoder().decode(bytes)) as Record<string, unknown>;
  } catch {
    return {};
  }
}
