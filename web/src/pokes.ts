/**
 * Pokes: the sheet's channel on AWS AppSync Events (or the local stack's stand-in), over the
 * Event API's WebSocket protocol. Every `data` message on the channel means "entries were
 * committed, pull now". The connection reconnects with jittered exponential backoff; while it is
 * down the page falls back to a slow pull (sheet-sync.ts).
 *
 * Protocol (the subset the server side implements, docs/operations.md): subprotocols
 * `aws-appsync-event-ws` and `header-<base64url JSON of the authorization headers>`;
 * `connection_init` → `connection_ack {connectionTimeoutMs}`; `ka` keep-alives (no `ka` within
 * `connectionTimeoutMs` means the link is dead); `subscribe {id, channel, authorization}` →
 * `subscribe_success` | `subscribe_error`; `data {id, event}`.
 */

export type LinkState = 'live' | 'reconnecting' | 'offline';

export interface EventsConfig {
  /** wss://<realtime domain>/event/realtime */
  realtimeUrl: string;
  /** The Event API's HTTP domain (what the authorization header names as `host`). */
  httpHost: string;
  /** The channel namespace. */
  namespace: string;
}

/** The Event API the server configured for this page (a meta tag written by the API), if any. */
export function eventsConfig(): EventsConfig | undefined {
  const meta = document.querySelector<HTMLMetaElement>('meta[name="sheetlog-events"]');
  if (!meta?.content) return undefined;
  try {
    const c = JSON.parse(meta.content) as Partial<EventsConfig>;
    if (typeof c.realtimeUrl !== 'string' || typeof c.httpHost !== 'string' || typeof c.namespace !== 'string')
      return undefined;
    return c as EventsConfig;
  } catch {
    return undefined;
  }
}

function base64url(text: string): string {
  const bytes = new TextEncoder().encode(text);
  let bin = '';
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

export interface PokeOptions {
  config: EventsConfig;
  logId: string;
  /**
   * The caller's JWT, bare, or '' for none. AppSync Events takes the token itself in its
   * `Authorization` field for Cognito and OIDC authorization; a `Bearer ` prefix makes it refuse
   * the connection ("Unable to parse JWT token"), unlike API Gateway's JWT authorizer.
   */
  auth: () => string;
  /** A poke arrived (`seq`: the sheet's next sequence), or the link came (back) up (`undefined`). */
  onPoke: (seq: number | undefined) => void;
  /** The sheet's members or roles changed (`{"members": true}`, sent by the API on a change). */
  onMembers?: () => void;
  onState: (s: LinkState) => void;
}

const FIRST_RETRY_MS = 500;
const MAX_RETRY_MS = 30_000;

export class PokeLink {
  private ws: WebSocket | undefined;
  private attempt = 0;
  private retryTimer: number | undefined;
  private watchdog: number | undefined;
  private timeoutMs = 300_000;
  private stopped = false;
  private subId = '';
  state: LinkState = 'reconnecting';

  constructor(private readonly o: PokeOptions) {}

  start(): void {
    this.stopped = false;
    this.connect();
  }

  stop(): void {
    this.stopped = true;
    window.clearTimeout(this.retryTimer);
    window.clearTimeout(this.watchdog);
    this.ws?.close();
    this.ws = undefined;
  }

  /** Drops the connection as a network failure would (tests use it). */
  drop(): void {
    this.ws?.close();
  }

  private setState(s: LinkState): void {
    if (this.state === s) return;
    this.state = s;
    this.o.onState(s);
  }

  private authorization(): Record<string, string> {
    const h: Record<string, string> = { host: this.o.config.httpHost };
    const a = this.o.auth();
    if (a) h.Authorization = a;
    return h;
  }

  private connect(): void {
    if (this.stopped) return;
    let ws: WebSocket;
    try {
      ws = new WebSocket(this.o.config.realtimeUrl, [
        'aws-appsync-event-ws',
        `header-${base64url(JSON.stringify(this.authorization()))}`,
      ]);
    } catch {
      this.retry();
      return;
    }
    this.ws = ws;
    ws.onopen = () => ws.send(JSON.stringify({ type: 'connection_init' }));
    ws.onmessage = (e) => this.receive(ws, e.data);
    ws.onclose = () => {
      if (this.ws !== ws) return;
      this.ws = undefined;
      window.clearTimeout(this.watchdog);
      this.retry();
    };
  }

  private alive(): void {
    window.clearTimeout(this.watchdog);
    this.watchdog = window.setTimeout(() => this.ws?.close(), this.timeoutMs);
  }

  private receive(ws: WebSocket, raw: unknown): void {
    let m: Record<string, unknown>;
    try {
      m = JSON.parse(String(raw)) as Record<string, unknown>;
    } catch {
      return;
    }
    switch (m.type) {
      case 'connection_ack':
        if (typeof m.connectionTimeoutMs === 'number') this.timeoutMs = m.connectionTimeoutMs;
        this.alive();
        this.subId = crypto.randomUUID();
        ws.send(
          JSON.stringify({
            type: 'subscribe',
            id: this.subId,
            channel: `/${this.o.config.namespace}/${this.o.logId}`,
            authorization: this.authorization(),
          }),
        );
        break;
      case 'ka':
        this.alive();
        break;
      case 'subscribe_success':
        if (m.id !== this.subId) break;
        this.attempt = 0;
        this.setState('live');
        // Whatever was committed while the link was down: one pull catches up.
        this.o.onPoke(undefined);
        break;
      case 'subscribe_error':
      case 'connection_error':
        // Refused (an expired token, no access): retried with backoff, shown as offline.
        this.setState('offline');
        ws.close();
        break;
      case 'data': {
        if (m.id !== this.subId) break;
        this.alive();
        const events = Array.isArray(m.event) ? m.event : [m.event];
        for (const e of events) {
          let seq: number | undefined;
          let members = false;
          try {
            const v = JSON.parse(String(e)) as { seq?: unknown; members?: unknown };
            if (typeof v.seq === 'number') seq = v.seq;
            members = v.members === true;
          } catch {}
          if (members) this.o.onMembers?.();
          else this.o.onPoke(seq);
        }
        break;
      }
    }
  }

  private retry(): void {
    if (this.stopped) return;
    if (this.state === 'live') this.setState(navigator.onLine ? 'reconnecting' : 'offline');
    else if (!navigator.onLine) this.setState('offline');
    const cap = Math.min(MAX_RETRY_MS, FIRST_RETRY_MS * 2 ** this.attempt);
    this.attempt = Math.min(this.attempt + 1, 16);
    const wait = cap / 2 + Math.random() * (cap / 2);
    window.clearTimeout(this.retryTimer);
    this.retryTimer = window.setTimeout(() => this.connect(), wait);
  }
}
