/**
 * One sheet: the grid, its toolbar, sync through Replicache, import, export and history.
 *
 * What the grid draws is a *view*: a sequence number `seq`, the server's cells as of `seq` (read
 * by range, in blocks, only where the grid looks), and the overlay of this client's pending
 * edits (model.ts). Live, the view follows Replicache's `meta/seq`; a new sequence is shown only
 * once the blocks in view have been read at it, so values never flicker back. In history, the
 * view is pinned at an older sequence with no overlay, read-only.
 */
import { getDefaultPuller, Replicache } from 'replicache';
import {
  ApiError,
  authAfter401,
  authHeader,
  authMode,
  bareToken,
  type CellsAnswer,
  call,
  type EntriesPage,
  type Entry,
  type Extent,
  freshAuth,
  putWithProgress,
  type Upload,
} from './api';
import { Grid, type Shown } from './grid';
import {
  type Cell,
  colName,
  csvValue,
  editText,
  fromJson,
  type LocalJson,
  type LocalView,
  MOVE_PREFIX,
  type Mutators,
  mutators,
  parseInput,
  parseRef,
  readLocal,
  refOf,
  toBase,
  type Value,
} from './model';
import { eventsConfig, type LinkState, PokeLink } from './pokes';
import { splitPush } from './push';
import { remember } from './sheets';
import { el, type Messages } from './ui';

const BLOCK_ROWS = 50;
const BLOCK_COLS = 20;
/** Blocks kept in memory; the oldest go first. */
const MAX_BLOCKS = 400;
/** A scroll settles for this long before the blocks it needs are read. */
const SETTLE_MS = 80;
const MAX_TEXT = 32_767;
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
const FORMATS: [string, string][] = [
  ['', 'General'],
  ['0', '0'],
  ['0.00', '0.00'],
  ['#,##0', '#,##0'],
  ['#,##0.00', '#,##0.00'],
  ['0%', '0%'],
  ['0.00%', '0.00%'],
  ['$#,##0.00', '$#,##0.00'],
  ['yyyy-mm-dd', 'Date'],
];

interface Block {
  values: Value[][];
  formats: Record<string, string>;
}

export interface SheetOptions {
  /** A viewer's sheet: nothing can be edited and nothing is pushed. */
  readOnly?: boolean;
  /** The sheet's name (cognito mode), shown instead of its id. */
  name?: string;
  /** More toolbar controls (the share button, the role). */
  actions?: HTMLElement[];
  /**
   * The signed-in person (cognito mode): their pending edits are kept in a store of their own,
   * so another person signing in on this browser never pushes them.
   */
  user?: string;
}

export async function openSheet(
  root: HTMLElement,
  logId: string,
  messages: Messages,
  opts: SheetOptions = {},
): Promise<void> {
  // In cognito mode the server lists the sheets; elsewhere this browser remembers them.
  if (authMode() !== 'cognito') remember(logId);
  const api = `/logs/${logId}`;
  const viewOnly = opts.readOnly === true;

  // ---- Layout ------------------------------------------------------------------------------
  const nameBox = el('input', {
    className: 'namebox',
    value: 'A1',
    title: 'Go to a cell (e.g. A900000)',
    ariaLabel: 'cell reference',
  });
  const formula = el('input', { className: 'formula', readOnly: true, ariaLabel: 'cell contents' });
  const format = el('select', { ariaLabel: 'number format', title: 'Number format of the selected cell' });
  for (const [code, label] of FORMATS) format.append(el('option', { value: code, textContent: label }));
  const button = (text: string, title: string) => el('button', { type: 'button', textContent: text, title });
  const insRow = button('+ Row', 'Insert a row above the selected cell');
  const delRow = button('− Row', "Delete the selected cell's row");
  const insCol = button('+ Column', 'Insert a column left of the selected cell');
  const delCol = button('− Column', "Delete the selected cell's column");
  const fileInput = el('input', {
    type: 'file',
    accept: '.csv,.xlsx,text/csv',
    className: 'file',
    ariaLabel: 'import a file',
  });
  const importLabel = el(
    'label',
    { className: 'button', title: 'Replace the sheet with a CSV or XLSX file' },
    'Import…',
    fileInput,
  );
  const exportBtn = button(
    'Export CSV',
    "Download the sheet as shown, as CSV. Texts that would run as formulas in a spreadsheet program get a leading ' " +
      '(Alt-click: every text exactly as stored)',
  );
  const historyBtn = button('History', 'See the sheet as it was at any version');
  const progress = el('progress', { className: 'progress', hidden: true, max: 1 });
  const progressText = el('span', { className: 'progress-text' });
  const status = el('span', { className: 'status', role: 'status' });
  const link = el('span', { className: 'link', title: 'How this page hears of other people’s edits' });
  const banner = el('div', { className: 'banner', hidden: true });
  const gridHost = el('div', { className: 'grid-host' });
  const historyList = el('ol', { className: 'history-list' });
  const slider = el('input', { type: 'range', min: '0', max: '0', value: '0', ariaLabel: 'version' });
  const historyPanel = el(
    'aside',
    { className: 'history', hidden: true },
    el('h2', {}, 'History'),
    el('p', { className: 'hint' }, 'Pick a version to see the sheet as it was after it (read-only).'),
    slider,
    historyList,
  );
  root.replaceChildren(
    el(
      'header',
      { className: 'toolbar' },
      el('a', { href: '/', className: 'home', title: 'All sheets' }, 'sheetlog'),
      opts.name
        ? el('span', { className: 'sheet-name', title: logId }, opts.name)
        : el('span', { className: 'sheet-id', title: logId }, logId.slice(0, 8)),
      ...(viewOnly ? [el('span', { className: 'badge view-only', title: 'Your role is viewer' }, 'View only')] : []),
      nameBox,
      formula,
      format,
      insRow,
      delRow,
      insCol,
      delCol,
      importLabel,
      exportBtn,
      historyBtn,
      progress,
      progressText,
      status,
      link,
      ...(opts.actions ?? []),
    ),
    banner,
    el('main', { className: 'sheet' }, gridHost, historyPanel),
  );

  // Fail early and in words when the sheet does not exist or this token cannot read it.
  try {
    await call<Extent>('GET', `${api}/extent`);
  } catch (e) {
    messages.error(e instanceof ApiError ? e.message : String(e));
    root.querySelector('main')?.replaceChildren(el('p', { className: 'empty' }, 'This sheet cannot be opened.'));
    return;
  }

  // ---- Views and blocks ----------------------------------------------------------------------
  let live: LocalView | undefined;
  let shown: LocalView | undefined;
  let historyAt: number | undefined;
  let viewport: { rows: [number, number]; cols: [number, number] } = { rows: [0, 40], cols: [0, 12] };
  const blocks = new Map<string, Block>();
  const inflight = new Map<string, Promise<void>>();
  const failed = new Map<string, number>();
  const key = (seq: number, br: number, bc: number) => `${seq}/${br}/${bc}`;

  /** The blocks a view needs for the cells in view (through its pending row/column changes). */
  function needed(v: LocalView): Set<string> {
    const out = new Set<string>();
    for (let r = viewport.rows[0]; r < viewport.rows[1]; r++) {
      for (let c = viewport.cols[0]; c < viewport.cols[1]; c++) {
        if (v.cells.has(refOf(r, c))) continue;
        const b = toBase(r, c, v.shapes);
        if (b) out.add(key(v.seq, Math.floor(b.row / BLOCK_ROWS), Math.floor(b.col / BLOCK_COLS)));
      }
    }
    return out;
  }

  function load(k: string): Promise<void> {
    const running = inflight.get(k);
    if (running) return running;
    const [seq, br, bc] = k.split('/').map(Number);
    const range = `${refOf(br * BLOCK_ROWS, bc * BLOCK_COLS)}:${refOf(br * BLOCK_ROWS + BLOCK_ROWS - 1, bc * BLOCK_COLS + BLOCK_COLS - 1)}`;
    const p = call<CellsAnswer>('GET', `${api}/cells?range=${range}&at=${seq}`)
      .then((a) => {
        blocks.set(k, { values: a.values as Value[][], formats: a.formats ?? {} });
        failed.delete(k);
        while (blocks.size > MAX_BLOCKS) {
          const oldest = blocks.keys().next().value;
          if (oldest === undefined) break;
          blocks.delete(oldest);
        }
      })
      .catch((e: unknown) => {
        failed.set(k, Date.now());
        messages.error(e instanceof ApiError ? e.message : `Reading cells failed: ${String(e)}`, 'read');
      })
      .finally(() => {
        inflight.delete(k);
        grid.schedule();
      });
    inflight.set(k, p);
    return p;
  }

  async function loadAll(v: LocalView): Promise<void> {
    await Promise.all([...needed(v)].filter((k) => !blocks.has(k)).map(load));
  }

  function baseCell(v: LocalView, row: number, col: number): Shown {
    const b = toBase(row, col, v.shapes);
    if (!b) return undefined;
    const block = blocks.get(key(v.seq, Math.floor(b.row / BLOCK_ROWS), Math.floor(b.col / BLOCK_COLS)));
    if (!block) return 'loading';
    const value = block.values[b.row % BLOCK_ROWS]?.[b.col % BLOCK_COLS] ?? null;
    const fmt = block.formats[refOf(b.row, b.col)];
    if (value === null && !fmt) return undefined;
    return fmt ? { value, format: fmt } : { value };
  }

  function cellAt(row: number, col: number): Shown {
    if (!shown) return 'loading';
    return shown.cells.get(refOf(row, col)) ?? baseCell(shown, row, col);
  }

  function current(row: number, col: number): Cell | undefined {
    const c = cellAt(row, col);
    return c === 'loading' ? undefined : c;
  }

  /** Shows `v` once the blocks in view are read at its sequence (at once if they are). */
  async function show(v: LocalView): Promise<void> {
    if (shown && v.seq === shown.seq) {
      shown = v;
      grid.schedule();
      return;
    }
    await loadAll(v);
    // Still what should be shown once read? (A newer view, or leaving history, supersedes it.)
    if (historyAt === undefined ? live === v : v.seq === historyAt) {
      shown = v;
      grid.schedule();
    }
  }

  /** What an edit is made against: the sequence of the view shown (see `Based` in model.ts). */
  const based = () => (shown ? { baseSeq: shown.seq } : {});
  let act: (f: () => Promise<unknown>) => void = () => {};
  let settle: ReturnType<typeof setTimeout> | undefined;
  const source = {
    cell: cellAt,
    viewport(rows: [number, number], cols: [number, number]) {
      viewport = { rows, cols };
      clearTimeout(settle);
      settle = setTimeout(() => {
        if (shown) void loadAll(shown);
      }, SETTLE_MS);
    },
    edit(row: number, col: number, text: string) {
      if (text.length > MAX_TEXT) {
        messages.error(`That text has ${text.length} characters; a cell holds at most ${MAX_TEXT}.`);
        return;
      }
      const fmt = current(row, col)?.format;
      act(() =>
        rep.mutate.set({
          cells: [{ ref: refOf(row, col), value: parseInput(text), ...(fmt ? { format: fmt } : {}) }],
          ...based(),
        }),
      );
    },
    clear(row: number, col: number) {
      act(() => rep.mutate.set({ cells: [{ ref: refOf(row, col), value: null }], ...based() }));
    },
    selected(row: number, col: number) {
      nameBox.value = refOf(row, col);
      const c = current(row, col);
      formula.value = editText(c);
      // A format the list does not offer (an imported sheet's, say) is shown as its code.
      const code = c?.format ?? '';
      if (code && ![...format.options].some((o) => o.value === code))
        format.append(el('option', { value: code, textContent: code }));
      format.value = code;
    },
    editText: (row: number, col: number) => editText(current(row, col)),
  };
  const grid = new Grid(gridHost, source);
  const renderGrid = grid.render.bind(grid);
  grid.render = () => {
    renderGrid();
    // What a test (or a person) can wait on: the sequence shown, fully read, and what is pending.
    if (shown && [...needed(shown)].every((k) => blocks.has(k))) grid.el.dataset.syncedSeq = String(shown.seq);
    source.selected(grid.selection.row, grid.selection.col);
  };
  // A failed block is retried a few seconds later, not on every frame.
  setInterval(() => {
    const now = Date.now();
    for (const [k, t] of failed) if (now - t > 3000 && !inflight.has(k)) void load(k);
  }, 1000);

  // ---- Replicache --------------------------------------------------------------------------
  const rep = new Replicache<Mutators>({
    name: opts.user ? `sheetlog-${opts.user}-${logId}` : `sheetlog-${logId}`,
    pushURL: `${api}/replicache/push`,
    pullURL: `${api}/replicache/pull?view=none`,
    auth: authHeader(),
    mutators,
    pullInterval: POLL_MS,
    pushDelay: 10,
    logLevel: 'error',
  });
  rep.getAuth = authAfter401;
  // The pull brings others' row and column changes as `move/<seq>/<n>` keys, which the mutators
  // rebase pending edits through (model.ts). A change older than every pending edit's base and
  // the view shown can move nothing any more: the pull deletes it, so the keys stay few.
  const pullHttp = getDefaultPuller(rep);
  rep.puller = async (req, requestID) => {
    rep.auth = await freshAuth();
    const res = await pullHttp(req, requestID);
    const r = res.response;
    if (r && 'patch' in r && typeof r.cookie === 'number') {
      let floor = Math.min(r.cookie, shown?.seq ?? r.cookie);
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

  // Pokes: pull when the sheet's channel says something was committed; poll slowly only while
  // the channel is down, and every second where the stack has no Event API.
  const events = localStorage.getItem('sheetlog.pokes') === 'off' ? undefined : eventsConfig();
  const fallbackMs = stored('sheetlog.fallbackPullMs', FALLBACK_PULL_MS);
  const showLink = (s: LinkState | 'polling') => {
    link.className = `link ${s}`;
    link.textContent = LINK_TEXT[s];
    grid.el.dataset.link = s;
  };
  let pokes: PokeLink | undefined;
  // A pull's head check is eventually consistent (docs/sync.md, "What an unchanged pull costs"):
  // right after a commit it may not show the poked sequence yet, so pull again a little later.
  const pullFor = (seq: number | undefined, tries = 0): void => {
    void rep
      .pull({ now: true })
      .catch(() => {})
      .then(() => {
        if (seq !== undefined && (live?.seq ?? 0) < seq && tries < 3) {
          window.setTimeout(() => pullFor(seq, tries + 1), 250 * 2 ** tries);
        }
      });
  };
  if (events) {
    rep.pullInterval = fallbackMs;
    pokes = new PokeLink({
      config: events,
      logId,
      auth: () => bareToken(authHeader()),
      onPoke: (seq) => pullFor(seq),
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
  // Push by hand to see what the server rejected (Replicache drops that part of the answer).
  rep.pusher = async (req, requestID) => {
    if (viewOnly) {
      // Nothing is pushed from a viewer's page (mutations from when it could edit stay pending).
      return { httpRequestInfo: { httpStatusCode: 403, errorMessage: 'view only' } };
    }
    try {
      // A long offline queue goes as several pushes, in order, each within the server's limits
      // (push.ts); the first that fails stops the rest, and Replicache retries from it.
      for (const mutations of splitPush(req.mutations)) {
        const auth = await freshAuth();
        const r = await fetch(`${api}/replicache/push`, {
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
  let online = true;
  let pending = 0;
  let starting = 0;
  const updateStatus = () => {
    grid.el.dataset.pending = String(pending + starting);
    grid.el.dataset.online = String(online);
    status.className = `status ${online ? (pending ? 'saving' : 'saved') : 'offline'}`;
    status.textContent = online
      ? pending
        ? `Saving ${pending} edit${pending === 1 ? '' : 's'}…`
        : 'All changes saved'
      : `Offline: ${pending} edit${pending === 1 ? '' : 's'} kept in this tab`;
    if (!online) messages.warn('You are offline. Edits are kept here and sync when the connection is back.', 'offline');
    else messages.dismiss('offline');
  };
  // Offline as soon as anything says so: Replicache (a failed pull), this page's own push, or
  // the browser. Replicache alone can miss it for as long as a pull that was in flight when the
  // connection dropped hangs, and a push that fails is reported to it as a status, not an error.
  function setOnline(o: boolean): void {
    if (online === o) return;
    online = o;
    updateStatus();
  }
  rep.onOnlineChange = setOnline;
  window.addEventListener('offline', () => setOnline(false));
  window.addEventListener('online', () => setOnline(true));
  // Only the newest count may write: an older one can finish after a mutation it did not see.
  let countGen = 0;
  const countPending = async () => {
    const gen = ++countGen;
    const n = (await rep.experimentalPendingMutations()).length;
    if (gen === countGen) {
      pending = n;
      updateStatus();
    }
  };
  /** Runs a mutation, counting it as pending from this moment (before Replicache has it). */
  act = (f) => {
    if (viewOnly) {
      messages.warn('You can view this sheet but not edit it: ask its owner to make you an editor.', 'view-only');
      return;
    }
    starting++;
    updateStatus();
    f().finally(() => {
      starting--;
      void countPending();
    });
  };
  rep.subscribe(readLocal, {
    onData: (j) => {
      if (!j) return;
      const v = fromJson(j as unknown as LocalJson);
      live = v;
      void countPending();
      if (historyAt === undefined) void show(v);
      if (!historyPanel.hidden) void refreshHistory();
    },
  });
  setInterval(() => void countPending(), 1000);
  updateStatus();

  // ---- Toolbar -------------------------------------------------------------------------------
  const guard = (f: () => void) => () => {
    if (viewOnly) {
      messages.warn('You can view this sheet but not edit it: ask its owner to make you an editor.', 'view-only');
      return;
    }
    if (historyAt !== undefined) {
      messages.warn('History is read-only: go back to the live sheet to edit.');
      return;
    }
    f();
    grid.el.focus();
  };
  insRow.onclick = guard(() =>
    act(() => rep.mutate['insert-rows']({ at: grid.selection.row + 1, count: 1, ...based() })),
  );
  delRow.onclick = guard(() =>
    act(() => rep.mutate['delete-rows']({ at: grid.selection.row + 1, count: 1, ...based() })),
  );
  insCol.onclick = guard(() =>
    act(() => rep.mutate['insert-columns']({ at: colName(grid.selection.col), count: 1, ...based() })),
  );
  delCol.onclick = guard(() =>
    act(() => rep.mutate['delete-columns']({ at: colName(grid.selection.col), count: 1, ...based() })),
  );
  format.onchange = guard(() => {
    const { row, col } = grid.selection;
    const value = current(row, col)?.value ?? null;
    act(() =>
      rep.mutate.set({
        cells: [{ ref: refOf(row, col), value, ...(format.value ? { format: format.value } : {}) }],
        ...based(),
      }),
    );
  });
  nameBox.onkeydown = (e) => {
    if (e.key !== 'Enter') return;
    const at = parseRef(nameBox.value);
    if (!at) {
      messages.error(`“${nameBox.value}” is not a cell reference (e.g. B12, or A900000).`);
      return;
    }
    grid.select(at.row, at.col);
    grid.el.focus();
  };

  // ---- Import ------------------------------------------------------------------------------
  fileInput.onchange = async () => {
    const file = fileInput.files?.[0];
    fileInput.value = '';
    if (!file) return;
    const ext = file.name.toLowerCase().split('.').pop();
    if (ext !== 'csv' && ext !== 'xlsx') {
      messages.error(`File rejected: “${file.name}” is not a .csv or .xlsx file.`);
      return;
    }
    if (historyAt !== undefined) exitHistory();
    const contentType =
      ext === 'csv' ? 'text/csv' : 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet';
    progress.hidden = false;
    progress.value = 0;
    try {
      progressText.textContent = `Uploading ${file.name}…`;
      const upload = await call<Upload>('POST', `${api}/uploads`, { type: 'import', size: file.size, contentType });
      await putWithProgress(upload, file, (sent, total) => {
        progress.value = total ? sent / total : 0;
        progressText.textContent = `Uploading ${file.name}: ${Math.round((100 * sent) / Math.max(total, 1))}%`;
      });
      progress.removeAttribute('value');
      progressText.textContent = 'Checking the file and committing…';
      const done = await call<{ seq: number }>('POST', `${api}/uploads/${upload.uploadId}/commit`, {});
      progressText.textContent = 'Imported; loading…';
      await until(() => (live?.seq ?? 0) > done.seq);
      progressText.textContent = `Imported ${file.name}.`;
      messages.info(`Imported ${file.name} (version ${done.seq}).`);
    } catch (e) {
      progressText.textContent = '';
      messages.error(e instanceof ApiError ? e.message : `The import failed: ${String(e)}`);
    } finally {
      progress.hidden = true;
    }
  };

  // ---- Export ------------------------------------------------------------------------------
  exportBtn.onclick = async (event: MouseEvent) => {
    if (!shown) return;
    const seq = shown.seq;
    // Alt-click: raw texts, as `sheetlog export --raw` (docs/web.md, "Export").
    const raw = event.altKey;
    try {
      const ext = await call<Extent>('GET', `${api}/extent?at=${seq}`);
      const parts: string[] = [];
      const per = Math.max(1, Math.min(1000, Math.floor(100_000 / Math.max(ext.columns, 1))));
      for (let r = 0; r < ext.rows; r += per) {
        progressText.textContent = `Exporting rows ${r + 1}–${Math.min(ext.rows, r + per)} of ${ext.rows}…`;
        const range = `A${r + 1}:${colName(ext.columns - 1)}${Math.min(ext.rows, r + per)}`;
        const a = await call<CellsAnswer>('GET', `${api}/cells?range=${range}&at=${seq}`);
        for (const row of a.values as Value[][]) {
          let end = row.length;
          while (end > 0 && row[end - 1] === null) end--;
          parts.push(
            `${row
              .slice(0, end)
              .map((v) => csvValue(v, raw))
              .join(',')}\r\n`,
          );
        }
      }
      const a = el('a', {
        href: URL.createObjectURL(new Blob(parts, { type: 'text/csv' })),
        download: `sheet-${logId.slice(0, 8)}-v${seq}.csv`,
      });
      document.body.append(a);
      a.click();
      a.remove();
      progressText.textContent = `Exported ${ext.rows} rows.`;
    } catch (e) {
      progressText.textContent = '';
      messages.error(e instanceof ApiError ? e.message : `The export failed: ${String(e)}`);
    }
  };

  // ---- History -----------------------------------------------------------------------------
  historyBtn.onclick = async () => {
    historyPanel.hidden = !historyPanel.hidden;
    historyBtn.classList.toggle('on', !historyPanel.hidden);
    if (historyPanel.hidden) exitHistory();
    else await refreshHistory();
  };
  slider.oninput = () => pinHistory(Number(slider.value));

  let lastListed = -1;
  async function refreshHistory(): Promise<void> {
    const end = live?.seq ?? 0;
    if (end === lastListed) return;
    lastListed = end;
    try {
      const from = Math.max(0, end - 200);
      let first = 0;
      const page = await call<EntriesPage>('GET', `${api}/entries?from=${from}&limit=200`).catch((e: unknown) => {
        // The oldest entries were removed by the retention policy: list from the first kept.
        if (!(e instanceof ApiError && e.code === 'truncated')) throw e;
        first = Number(e.detail.firstSeq ?? from);
        return call<EntriesPage>('GET', `${api}/entries?from=${first}&limit=200`);
      });
      // The list shows the newest 200 entries; the slider reaches every version still kept.
      slider.min = String(first);
      slider.max = String(Math.max(0, end - 1));
      if (historyAt === undefined) slider.value = slider.max;
      historyList.replaceChildren(
        ...page.entries
          .slice()
          .reverse()
          .map((e) => {
            const item = el(
              'li',
              {},
              el('button', { type: 'button', className: 'entry', onclick: () => pinHistory(e.seq) }, ...describe(e)),
            );
            item.dataset.seq = String(e.seq);
            if (historyAt === e.seq + 1) item.classList.add('on');
            return item;
          }),
      );
    } catch (e) {
      messages.error(e instanceof ApiError ? e.message : String(e), 'history');
    }
  }

  function describe(e: Entry): (string | HTMLElement)[] {
    const b = e.body;
    let what: string = e.type;
    let who = 'API';
    const cells = (x: unknown) => (x as { cells?: { ref: string; value: unknown }[] })?.cells ?? [];
    if (e.type === 'set')
      what = cells(b)
        .map((c) => `${c.ref}=${JSON.stringify(c.value)}`)
        .join(' ');
    if (e.type === 'mutations') {
      // One client's run, or a group commit's runs (queued pushes of several clients together).
      type Run = { clientID?: string; mutations?: { name: string; args: unknown }[] };
      const runs = Array.isArray(b.runs) ? (b.runs as Run[]) : [b as Run];
      const name = (id: unknown) => (id === rep.clientID ? 'this tab' : `client ${String(id).slice(0, 8)}`);
      const clients = [...new Set(runs.map((r) => r.clientID))];
      who = clients.length === 1 ? name(clients[0]) : `${clients.length} clients`;
      what =
        runs
          .flatMap((r) => r.mutations ?? [])
          .map((m) =>
            m.name === 'set'
              ? cells(m.args)
                  .map((c) => `${c.ref}=${JSON.stringify(c.value)}`)
                  .join(' ')
              : m.name,
          )
          .join('; ') || 'rejected edits';
    }
    if (e.type === 'import') what = `import ${String(b.format ?? '').toUpperCase()}`;
    const when = new Date(e.created);
    return [
      el('span', { className: 'v' }, `#${e.seq}`),
      el('span', { className: 'what' }, what.length > 60 ? `${what.slice(0, 60)}…` : what),
      el('span', { className: 'meta' }, `${when.toLocaleString()} · ${who}`),
    ];
  }

  function pinHistory(seq: number): void {
    historyAt = seq + 1;
    slider.value = String(seq);
    grid.readOnly = true;
    grid.el.classList.add('readonly');
    for (const li of historyList.querySelectorAll('li')) li.classList.toggle('on', li.dataset.seq === String(seq));
    banner.hidden = false;
    banner.replaceChildren(
      `Version ${seq}: the sheet as it was after this entry. Read-only. `,
      el('button', { type: 'button', onclick: () => exitHistory() }, 'Back to the live sheet'),
    );
    void show({ seq: seq + 1, cells: new Map(), shapes: [] });
  }

  function exitHistory(): void {
    historyAt = undefined;
    grid.readOnly = viewOnly;
    grid.el.classList.toggle('readonly', viewOnly);
    banner.hidden = true;
    if (live) void show(live);
  }

  if (viewOnly) {
    grid.readOnly = true;
    grid.el.classList.add('readonly');
    grid.el.dataset.readOnly = 'true';
    for (const b of [insRow, delRow, insCol, delCol, format, fileInput]) b.disabled = true;
    importLabel.hidden = true;
  }
  grid.el.focus();
  grid.schedule();
}

function until(f: () => boolean, timeoutMs = 120_000): Promise<void> {
  return new Promise((resolve, reject) => {
    const start = Date.now();
    const tick = () => {
      if (f()) resolve();
      else if (Date.now() - start > timeoutMs) reject(new Error('timed out waiting for the sheet to catch up'));
      else setTimeout(tick, 100);
    };
    tick();
  });
}
