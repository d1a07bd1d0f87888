/**
 * One sheet's sync: its Replicache (pulls with `view=none`, the `move/` keys trimmed, pushes sent
 * by hand in parts), the pokes that make it pull (or polling where there are none), and the
 * state shown: online or not, the edits pending, the link's state, in the toolbar and on the
 * grid's `data-pending`, `data-online` and `data-link`.
 */
import { getDefaultPuller, Replicache } from 'replicache';
import { authAfter401, authHeader, bareToken, freshAuth } from './api';
import type { Grid } from './grid';
import { fromJson, type LocalJson, type LocalView, MOVE_PREFIX, type Mutators, mutators, readLocal } from './model';
import { eventsConfig, type LinkState, PokeLink } from './pokes';
import { splitPush } from './push';
import { type SheetContext, VIEW_ONLY } from './sheet-context';

/** Without an Event API (or with `sheetlog.pokes` = `off`), the page polls this often. */
const POLL_MS = 1000;
/** With pokes, the page pulls this often only while its channel is down. */
const FALLBACK_PULL_MS = 30_000;

const LINK_TEXT = { live: 'live', reconnecting: 'reconnecting…', offline: 'updates offline', polling: 'polling' };

/** A number from local storage (a test or a curious user can set it), else `fallback`. */
function stored(key: string, fallback: number): number {
  const v = Number(localStorage.getItem(key));
  return Number.isFinite(v) && v > 0 ? v : fallback;
}

type Rep = Replicache<Mutators>;

/**
 * The sheet's Replicache store (one per person in cognito mode). The pull brings others' row and
 * column changes as `move/<seq>/<n>` keys, which the mutators rebase pending edits through
 * (model.ts). A change older than every pending edit's base and the view shown can move nothing
 * any more: the pull deletes it, so the keys stay few.
 */
function replicache(ctx: SheetContext, user: string | undefined): Rep {
  const rep = new Replicache<Mutators>({
    name: user ? `sheetlog-${user}-${ctx.logId}` : `sheetlog-${ctx.logId}`,
    pushURL: `${ctx.api}/replicache/push`,
    pullURL: `${ctx.api}/replicache/pull?view=none`,
    auth: authHeader(),
    mutators,
    pullInterval: POLL_MS,
    // Push as soon as an edit is made (Replicache waits 10 ms by default to gather more).
    pushDelay: 0,
    logLevel: 'error',
  });
  rep.getAuth = authAfter401;
  const pullHttp = getDefaultPuller(rep);
  rep.puller = async (req, requestID) => {
    rep.auth = await freshAuth();
    const res = await pullHttp(req, requestID);
    const r = res.response;
    if (r && 'patch' in r && typeof r.cookie === 'number') {
      let floor = Math.min(r.cookie, ctx.shown?.seq ?? r.cookie);
      for (const m of await rep.experimentalPendingMutations()) {
        const base = (m.args as { baseSeq?: unknown } | undefined)?.baseSeq;
        if (typeof base === 'number') floor = Math.min(floor, base);
      }
      const keys = await rep.query(async (tx) => tx.scan({ prefix: MOVE_PREFIX }).keys().toArray());
      const stale = keys.filter((k) => Number(k.slice(MOVE_PREFIX.length).split('/')[0]) < floor);
      if (stale.length) r.patch.push(...stale.map((key) => ({ op: 'del' as const, key })));
    }
    return res;
  };
  return rep;
}

/**
 * Pokes: pull when the sheet's channel says something was committed; poll slowly only while the
 * channel is down, and every second where the stack has no Event API.
 */
function listen(ctx: SheetContext, rep: Rep, grid: Grid): void {
  const link = ctx.ui.link;
  const events = localStorage.getItem('sheetlog.pokes') === 'off' ? undefined : eventsConfig();
  const fallbackMs = stored('sheetlog.fallbackPullMs', FALLBACK_PULL_MS);
  const showLink = (s: LinkState | 'polling') => {
    link.className = `link ${s}`;
    link.textContent = LINK_TEXT[s];
    grid.el.dataset.link = s;
  };
  // A pull's head check is eventually consistent (docs/sync.md, "What an unchanged pull costs"):
  // right after a commit it may not show the poked sequence yet, so pull again a little later.
  const pullFor = (seq: number | undefined, tries = 0): void => {
    void rep
      .pull({ now: true })
      .catch(() => {})
      .then(() => {
        if (seq !== undefined && (ctx.live?.seq ?? 0) < seq && tries < 3) {
          window.setTimeout(() => pullFor(seq, tries + 1), 250 * 2 ** tries);
        }
      });
  };
  if (events) {
    rep.pullInterval = fallbackMs;
    const pokes = new PokeLink({
      config: events,
      logId: ctx.logId,
      auth: () => bareToken(authHeader()),
      onPoke: (seq) => pullFor(seq),
      onMembers: () => ctx.onMembers?.(),
      onState: (s) => {
        rep.pullInterval = s === 'live' ? null : fallbackMs;
        showLink(s);
      },
    });
    showLink('reconnecting');
    pokes.start();
    (window as unknown as { sheetlogPokes?: PokeLink }).sheetlogPokes = pokes;
  } else {
    rep.pullInterval = stored('sheetlog.pullMs', POLL_MS);
    showLink('polling');
  }
}

/** Pushes by hand, to see what the server rejected (Replicache drops that part of the answer). */
function pusher(ctx: SheetContext, setOnline: (online: boolean) => void): Rep['pusher'] {
  const { messages } = ctx;
  return async (req, requestID) => {
    if (ctx.viewOnly) {
      // Nothing is pushed from a viewer's page (mutations from when it could edit stay pending).
      return { httpRequestInfo: { httpStatusCode: 403, errorMessage: 'view only' } };
    }
    try {
      // A long offline queue goes as several pushes, in order, each within the server's limits
      // (push.ts); the first that fails stops the rest, and Replicache retries from it.
      for (const mutations of splitPush(req.mutations)) {
        const auth = await freshAuth();
        const r = await fetch(`${ctx.api}/replicache/push`, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'x-replicache-requestid': requestID,
            ...(auth ? { authorization: auth } : {}),
          },
          body: JSON.stringify({ ...req, mutations }),
        });
        const text = await r.text();
        setOnline(true);
        if (r.ok) {
          messages.dismiss('push');
          const body = JSON.parse(text) as { rejected?: { id: number; error: string }[]; error?: string };
          for (const x of body.rejected ?? []) messages.error(`An edit was refused by the server: ${x.error}`);
          // A Replicache error answer (200 with `error`): the later parts would get the same.
          if (body.error !== undefined) break;
        } else if (r.status === 429 || r.status === 503) {
          // Throttled or busy: nothing was lost. Replicache sends the push again with its own
          // growing delay, so this is a notice, not an error.
          messages.warn('The service is busy: your edits are kept here and sent again in a moment.', 'push');
          return { httpRequestInfo: { httpStatusCode: r.status, errorMessage: text } };
        } else {
          let said = text;
          try {
            said = (JSON.parse(text) as { error: { message: string } }).error.message;
          } catch {}
          messages.error(`Saving edits failed (${r.status}): ${said}`, 'push');
          return { httpRequestInfo: { httpStatusCode: r.status, errorMessage: text } };
        }
      }
      return { httpRequestInfo: { httpStatusCode: 200, errorMessage: '' } };
    } catch {
      setOnline(false);
      return { httpRequestInfo: { httpStatusCode: 0, errorMessage: 'offline' } };
    }
  };
}

/** Online or not and the edits pending: the save status, its messages and the grid's data. */
class SaveStatus {
  online = true;
  /** Edits Replicache holds unconfirmed. */
  pending = 0;
  /** Edits begun that Replicache does not hold yet. */
  starting = 0;

  constructor(
    private readonly ctx: SheetContext,
    private readonly grid: Grid,
  ) {}

  update(): void {
    const { online, pending } = this;
    const status = this.ctx.ui.status;
    this.grid.el.dataset.pending = String(pending + this.starting);
    this.grid.el.dataset.online = String(online);
    status.className = `status ${online ? (pending ? 'saving' : 'saved') : 'offline'}`;
    status.textContent = online
      ? pending
        ? `Saving ${pending} edit${pending === 1 ? '' : 's'}…`
        : this.ctx.viewOnly
          ? 'Up to date (view only)'
          : 'All changes saved'
      : `Offline: ${pending} edit${pending === 1 ? '' : 's'} kept in this tab`;
    if (!online)
      this.ctx.messages.warn('You are offline. Edits are kept here and sync when the connection is back.', 'offline');
    else this.ctx.messages.dismiss('offline');
  }

  // Offline as soon as anything says so: Replicache (a failed pull), this page's own push, or
  // the browser. Replicache alone can miss it for as long as a pull that was in flight when the
  // connection dropped hangs, and a push that fails is reported to it as a status, not an error.
  setOnline(o: boolean): void {
    if (this.online === o) return;
    this.online = o;
    this.update();
  }
}

export interface SheetSync {
  readonly rep: Rep;
}

/**
 * Starts syncing the sheet: Replicache, pokes or polling, the save status, and `ctx.act`.
 * `onLive` gets each new live view (after `ctx.live` is set to it).
 */
export function startSync(
  ctx: SheetContext,
  grid: Grid,
  user: string | undefined,
  onLive: (v: LocalView) => void,
): SheetSync {
  const rep = replicache(ctx, user);
  listen(ctx, rep, grid);
  const state = new SaveStatus(ctx, grid);
  const setOnline = (o: boolean) => state.setOnline(o);
  rep.pusher = pusher(ctx, setOnline);
  rep.onOnlineChange = setOnline;
  window.addEventListener('offline', () => setOnline(false));
  window.addEventListener('online', () => setOnline(true));
  // Only the newest count may write: an older one can finish after a mutation it did not see.
  let countGen = 0;
  const countPending = async () => {
    const gen = ++countGen;
    const n = (await rep.experimentalPendingMutations()).length;
    if (gen === countGen) {
      state.pending = n;
      state.update();
    }
  };
  ctx.act = (f) => {
    if (ctx.viewOnly) {
      ctx.messages.warn(VIEW_ONLY, 'view-only');
      return;
    }
    state.starting++;
    state.update();
    f(rep.mutate).finally(() => {
      state.starting--;
      void countPending();
    });
  };
  rep.subscribe(readLocal, {
    onData: (j) => {
      if (!j) return;
      const v = fromJson(j as unknown as LocalJson);
      ctx.live = v;
      void countPending();
      onLive(v);
    },
  });
  setInterval(() => void countPending(), 1000);
  state.update();
  return { rep };
}
