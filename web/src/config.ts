/** `GET /config.json`: how this stack authorizes, read before anything else (docs/web.md). */
import type { CognitoConfig } from './cognito';

export type AuthMode = 'none' | 'iam' | 'jwt' | 'cognito';

export interface PageConfig {
  auth: AuthMode;
  cognito: CognitoConfig | null;
}

const MODES: AuthMode[] = ['none', 'iam', 'jwt', 'cognito'];

/** Checks the document's shape; anything unexpected falls back to the page's old behaviour. */
export function parseConfig(v: unknown): PageConfig {
  const o = (v ?? {}) as Record<string, unknown>;
  const auth = MODES.includes(o.auth as AuthMode) ? (o.auth as AuthMode) : 'jwt';
  const c = (o.cognito ?? null) as Record<string, unknown> | null;
  if (auth !== 'cognito') return { auth, cognito: null };
  const ok =
    c !== null &&
    ['region', 'userPoolId', 'clientId'].every((k) => typeof c[k] === 'string' && c[k]) &&
    (c.endpoint === undefined || c.endpoint === null || typeof c.endpoint === 'string');
  if (!ok) throw new Error('This stack says it uses Cognito sign-in but does not say which user pool.');
  const region = String(c.region);
  const endpoint =
    typeof c.endpoint === 'string' && c.endpoint ? c.endpoint : `https://cognito-idp.${region}.amazonaws.com/`;
  return {
    auth,
    cognito: { region, userPoolId: String(c.userPoolId), clientId: String(c.clientId), endpoint },
  };
}

/**
 * The stack's page configuration. A stack from before `/config.json` answers 404: the page then
 * behaves as it did (a JWT pasted under "Token", if any).
 */
export async function loadConfig(fetchFn: typeof fetch = (...a) => fetch(...a)): Promise<PageConfig> {
  let resp: Response;
  try {
    resp = await fetchFn('/config.json', { headers: { accept: 'application/json' } });
  } catch {
    throw new Error('You are offline, or the API cannot be reached.');
  }
  if (resp.status === 404) return { auth: 'jwt', cognito: null };
  if (!resp.ok) throw new Error(`The API answered ${resp.status} for its configuration.`);
  return parseConfig(await resp.json());
}
