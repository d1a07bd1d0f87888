/**
 * The page's calls to the sheetlog API, on the page's own origin. Every failure becomes an
 * `ApiError` whose `message` is a sentence for the person using the page.
 */
import type { LayoutJson } from './grid-layout';
import type { Style } from './styles';

const TOKEN_KEY = 'sheetlog.token';

/** A JWT for a deployment with JWT authorization: from `#token=…` once, then local storage. */
export function token(): string | undefined {
  const m = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (m) {
    localStorage.setItem(TOKEN_KEY, decodeURIComponent(m[1]));
    history.replaceState(null, '', location.pathname + location.search);
  }
  return localStorage.getItem(TOKEN_KEY) ?? undefined;
}

export function setToken(value: string): void {
  if (value.trim()) localStorage.setItem(TOKEN_KEY, value.trim());
  else localStorage.removeItem(TOKEN_KEY);
}

/**
 * Where the `Authorization` header comes from. By default the JWT above (or none); in `cognito`
 * mode, the signed-in session (main.ts sets it): `fresh` refreshes a token that is due before a
 * call, `unauthorized` gets a new one after a 401 (true: try the call once more).
 */
export interface AuthProvider {
  mode: 'none' | 'iam' | 'jwt' | 'cognito';
  header(): string;
  fresh(): Promise<void>;
  unauthorized(): Promise<boolean>;
}

/** The JWT above as the header (none without one): every mode but `cognito`. */
export function tokenProvider(mode: AuthProvider['mode']): AuthProvider {
  return {
    mode,
    header: () => {
      const t = token();
      return t ? `Bearer ${t}` : '';
    },
    fresh: async () => {},
    unauthorized: async () => false,
  };
}
let provider: AuthProvider = tokenProvider('jwt');

export function setAuthProvider(p: AuthProvider): void {
  provider = p;
}

export function authMode(): AuthProvider['mode'] {
  return provider.mode;
}

export function authHeader(): string {
  return provider.header();
}

/** The token of an `Authorization` value without its `Bearer ` scheme (what AppSync Events takes). */
export function bareToken(header: string): string {
  return header.replace(/^bearer\s+/i, '');
}

/** The header after a 401 from a call the page does not make through `call` (Replicache's). */
export async function authAfter401(): Promise<string> {
  await provider.unauthorized();
  return provider.header();
}

/** Before a call the page makes outside `call` (its own push): a token that is due is refreshed. */
export async function freshAuth(): Promise<string> {
  await provider.fresh();
  return provider.header();
}

export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly code: string,
    readonly detail: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

/** The API's error body, `{"error": {"code", "message", …}}`, in words. */
function explain(status: number, body: Record<string, unknown> | undefined): ApiError {
  const e = (body?.error ?? {}) as Record<string, unknown>;
  const code = typeof e.code === 'string' ? e.code : `http-${status}`;
  const said = typeof e.message === 'string' ? e.message : '';
  const words: Record<string, string> = {
    unauthorized: 'The API wants a sign-in token: paste one under “Token”.',
    forbidden: 'Your token does not give access to this sheet.',
    'log-not-found': 'There is no sheet with this id (a typo, or it was made on another stack).',
    conflict: 'Someone else changed the sheet at the same moment; try again.',
    busy: 'The sheet is busy with many writers; try again in a moment.',
    throttled: 'The service is throttling requests; try again in a moment.',
    'upload-too-large': `File rejected: ${said}`,
    'invalid-payload': `File rejected: ${said}`,
    'range-too-large': `Too much to read at once: ${said}`,
    'history-deleted': 'That version is older than this stack keeps (its retention policy removed it).',
  };
  if (provider.mode === 'cognito') {
    words.unauthorized = 'Your sign-in has expired: sign in again.';
    words.forbidden =
      'You do not have access to this: ask the sheet’s owner to share it with you, or to make you an editor.';
  }
  let message = words[code] ?? (said || `The API answered ${status}.`);
  if (status === 401 && !words[code]) message = words.unauthorized;
  // API Gateway's own refusal (no error code of ours): its authorizer turned the request away.
  if (status === 403 && typeof e.code !== 'string') {
    message =
      provider.mode === 'cognito'
        ? words.forbidden
        : token()
          ? 'The API refused this token: it may have expired, or be for another stack.'
          : 'This API needs authorization. With JWT, paste a token under “Token” on the sheet list; ' +
            'an IAM-authorized API cannot be called from a browser (deploy with cognito or jwtIssuer for the web page).';
  }
  return new ApiError(message, status, code, e);
}

/** How many times {@link call} sends a throttled request again. */
const RETRIES = 5;

function retryable(status: number, method: string): boolean {
  return status === 429 || (status === 503 && method === 'GET');
}

/**
 * The wait before retry `attempt` (0-based): the answer's Retry-After in seconds (at most 30),
 * else full jitter over 200 ms doubling per attempt, at most 10 s.
 */
export function retryDelay(retryAfter: string | null, attempt: number, random: () => number = Math.random): number {
  const secs = retryAfter === null ? Number.NaN : Number.parseInt(retryAfter, 10);
  if (Number.isFinite(secs) && secs >= 0) return Math.min(secs, 30) * 1000;
  return random() * Math.min(200 * 2 ** attempt, 10_000);
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export async function call<T>(
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<T> {
  const send = async (): Promise<Response> => {
    await provider.fresh();
    const h: Record<string, string> = { ...headers };
    const auth = authHeader();
    if (auth) h.authorization = auth;
    if (body !== undefined) h['content-type'] = 'application/json';
    try {
      return await fetch(path, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body) });
    } catch {
      throw new ApiError('You are offline, or the API cannot be reached.', 0, 'offline');
    }
  };
  let resp = await send();
  if (resp.status === 401 && (await provider.unauthorized())) resp = await send();
  // A 429 never reached the function (the stage's throttle) or was refused whole (a rate
  // limit): send it again after its Retry-After, or a growing, jittered wait. A 503 may have
  // run part-way, so only reads are retried.
  for (let attempt = 0; attempt < RETRIES && retryable(resp.status, method); attempt++) {
    await sleep(retryDelay(resp.headers.get('retry-after'), attempt));
    resp = await send();
  }
  if (resp.status === 204) return undefined as T;
  const text = await resp.text();
  let parsed: Record<string, unknown> | undefined;
  try {
    parsed = text ? (JSON.parse(text) as Record<string, unknown>) : undefined;
  } catch {
    parsed = undefined;
  }
  if (!resp.ok) throw explain(resp.status, parsed);
  return parsed as T;
}

export interface CellsAnswer {
  seq: number;
  range: string;
  values: unknown[][];
  formats?: Record<string, string>;
  /** The style of every styled cell, by A1 ref (styles.ts). */
  styles?: Record<string, Style>;
  /**
   * The formulas' texts by A1 ref, from a server that computes them; `values` then holds their
   * computed values and texts unquoted. Without it, `values` is the input form (model.ts).
   */
  formulas?: Record<string, string>;
}
export interface Extent {
  seq: number;
  rows: number;
  columns: number;
  range?: string;
  /** Column widths, row heights and the split, when any are set (grid-layout.ts). */
  layout?: LayoutJson;
}
export interface Entry {
  seq: number;
  type: string;
  created: string;
  body: Record<string, unknown>;
}
export interface EntriesPage {
  entries: Entry[];
  nextSeq: number;
  complete: boolean;
}
export interface Upload {
  uploadId: string;
  url: string;
  method: string;
  headers: Record<string, string>;
}

/** PUTs a file to a presigned URL, reporting progress (fetch cannot report upload progress). */
export function putWithProgress(
  upload: Upload,
  file: Blob,
  onProgress: (sent: number, total: number) => void,
): Promise<void> {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open(upload.method || 'PUT', upload.url);
    for (const [k, v] of Object.entries(upload.headers ?? {})) {
      // Browsers set these themselves and refuse to be told.
      if (!/^(content-length|host)$/i.test(k)) xhr.setRequestHeader(k, v);
    }
    xhr.upload.onprogress = (e) => onProgress(e.loaded, e.lengthComputable ? e.total : file.size);
    xhr.onload = () =>
      xhr.status >= 200 && xhr.status < 300
        ? resolve()
        : reject(new ApiError(`File rejected by storage (HTTP ${xhr.status}).`, xhr.status, 'upload-failed'));
    xhr.onerror = () => reject(new ApiError('The upload failed: offline, or storage cannot be reached.', 0, 'offline'));
    xhr.send(file);
  });
}
