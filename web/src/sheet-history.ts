/**
 * One sheet's history panel: the last 200 entries with what, when and who (this tab, another
 * client, or the API), and a slider over every version still kept. Picking one pins the view at
 * the sheet as it was after that entry (`at = seq + 1`, no overlay), read-only, with a banner
 * back to the live sheet and (for editors) one that restores that version: one `restore` entry
 * (`POST /logs/{logId}/restore`), undone by restoring the version just before it. Named versions
 * (`/logs/{logId}/versions`) are listed first; an editor names the version on screen.
 */
import { ApiError, call, type EntriesPage, type Entry } from './api';
import type { SheetContext } from './sheet-context';
import type { SheetView } from './sheet-view';
import { el } from './ui';

/** One page of `GET /logs/{logId}/diff`. */
type DiffPage = {
  changes: { ref: string; before: { value: unknown }; after: { value: unknown } }[];
  complete: boolean;
};

/** Changes a compare lists at most (one page of the diff). */
const DIFF_SHOWN = 200;

/** A named version as `GET /logs/{logId}/versions` lists it. */
type Named = { seq: number; name: string; createdAt: number; by?: string };

export interface SheetHistory {
  /** Lists the entries again if the sheet moved since the last listing. */
  refresh(): Promise<void>;
  /** Back to the live sheet. */
  exit(): void;
}

/** Wires the History button, the slider and the list. `clientID` names this tab's Replicache client. */
/**
 * `group`: this page's Replicache client group, named in a restore so the restore is a step of
 * this person's undo stack too (Ctrl+Z takes it back while nothing came after it).
 */
export function sheetHistory(
  ctx: SheetContext,
  view: SheetView,
  clientID: () => string,
  group: () => Promise<string>,
): SheetHistory {
  const { ui, messages, api } = ctx;
  const { grid } = view;
  const { historyBtn, historyPanel, historyList, namedList, diffList, slider, banner } = ui;

  historyBtn.onclick = async () => {
    historyPanel.hidden = !historyPanel.hidden;
    historyBtn.classList.toggle('on', !historyPanel.hidden);
    if (historyPanel.hidden) exit();
    else await Promise.all([refresh(), listNamed()]);
  };
  slider.oninput = () => pin(Number(slider.value));

  let lastListed = -1;
  async function refresh(): Promise<void> {
    const end = ctx.live?.seq ?? 0;
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
      if (ctx.historyAt === undefined) slider.value = slider.max;
      historyList.replaceChildren(
        ...page.entries
          .slice()
          .reverse()
          .map((e) => {
            const item = el(
              'li',
              {},
              el('button', { type: 'button', className: 'entry', onclick: () => pin(e.seq) }, ...describe(e, clientID)),
            );
            item.dataset.seq = String(e.seq);
            if (ctx.historyAt === e.seq + 1) item.classList.add('on');
            return item;
          }),
      );
    } catch (e) {
      messages.error(e instanceof ApiError ? e.message : String(e), 'history');
    }
  }

  /** The named versions, newest first; each pins its version like an entry does. */
  async function listNamed(): Promise<void> {
    try {
      const { versions } = await call<{ versions: Named[] }>('GET', `${api}/versions`);
      namedList.replaceChildren(
        ...versions.map((v) => {
          const shown = v.seq - 1;
          const item = el(
            'li',
            {},
            el(
              'button',
              { type: 'button', className: 'entry', onclick: () => pin(shown) },
              el('span', { className: 'v' }, shown < 0 ? 'empty' : `#${shown}`),
              el('span', { className: 'what' }, `★ ${v.name}`),
              el('span', { className: 'meta' }, `named ${new Date(v.createdAt).toLocaleString()}`),
            ),
          );
          item.dataset.seq = String(shown);
          return item;
        }),
      );
    } catch (e) {
      messages.error(e instanceof ApiError ? e.message : String(e), 'history');
    }
  }

  /** Asks for a name in the banner, then names version `at` (the sheet after entry `at - 1`). */
  function askName(at: number): void {
    const input = el('input', {
      type: 'text',
      ariaLabel: 'version name',
      placeholder: 'Name this version',
      maxLength: 100,
    });
    const save = async (): Promise<void> => {
      try {
        await call('POST', `${api}/versions`, { seq: at, name: input.value });
        messages.info(`Named version ${at - 1} "${input.value.trim()}".`, 'history');
        await listNamed();
        pin(at - 1);
      } catch (e) {
        messages.error(e instanceof ApiError ? e.message : String(e), 'history');
      }
    };
    input.onkeydown = (ev) => {
      if (ev.key === 'Enter') void save();
      if (ev.key === 'Escape') pin(at - 1);
    };
    banner.replaceChildren(
      `Name version ${at - 1}: `,
      input,
      el('button', { type: 'button', className: 'save-name', onclick: () => void save() }, 'Save'),
      el('button', { type: 'button', onclick: () => pin(at - 1) }, 'Cancel'),
    );
    input.focus();
  }

  function pin(seq: number): void {
    ctx.historyAt = seq + 1;
    slider.value = String(seq);
    grid.readOnly = true;
    grid.el.classList.add('readonly');
    for (const li of [...historyList.querySelectorAll('li'), ...namedList.querySelectorAll('li')]) {
      li.classList.toggle('on', li.dataset.seq === String(seq));
    }
    banner.hidden = false;
    const restore = ctx.viewOnly
      ? []
      : [
          el(
            'button',
            { type: 'button', className: 'restore', onclick: () => void restoreTo(seq + 1) },
            'Restore this version',
          ),
          el(
            'button',
            { type: 'button', className: 'name-version', onclick: () => askName(seq + 1) },
            'Name this version',
          ),
        ];
    banner.replaceChildren(
      `Version ${seq}: the sheet as it was after this entry. Read-only. `,
      ...restore,
      el('button', { type: 'button', className: 'compare', onclick: () => void compare(seq + 1) }, 'Compare with now'),
      el('button', { type: 'button', onclick: () => exit() }, 'Back to the live sheet'),
    );
    diffList.hidden = true;
    void view.show({ seq: seq + 1, cells: new Map(), styles: new Map(), shapes: [] });
  }

  /** Lists the cells that differ between the version as of `at` and the live sheet (a page). */
  async function compare(at: number): Promise<void> {
    try {
      const d = await call<DiffPage>('GET', `${api}/diff?from=${at}&limit=${DIFF_SHOWN}`);
      const text = (c: { value: unknown }) => (c.value === null ? '(empty)' : JSON.stringify(c.value));
      const more = d.complete ? '' : ' (the first of them)';
      diffList.replaceChildren(
        el('h3', {}, `${d.changes.length} cell(s) differ from now${more}`),
        el(
          'ol',
          { className: 'history-list' },
          ...d.changes.map((c) =>
            el(
              'li',
              { className: 'change' },
              el('span', { className: 'v' }, c.ref),
              el('span', { className: 'what' }, `${text(c.before)} → ${text(c.after)}`),
            ),
          ),
        ),
      );
      diffList.hidden = false;
    } catch (e) {
      messages.error(e instanceof ApiError ? e.message : String(e), 'history');
    }
  }

  /** Makes the live sheet the version as of `at`, then offers to undo that. */
  async function restoreTo(at: number): Promise<void> {
    try {
      const done = await call<{ seq: number }>('POST', `${api}/restore`, { seq: at, clientGroupId: await group() });
      exit();
      banner.hidden = false;
      banner.replaceChildren(
        `Restored version ${at - 1}; what came after it stays in History. `,
        el('button', { type: 'button', className: 'undo', onclick: () => void undo(done.seq) }, 'Undo'),
        el('button', { type: 'button', onclick: () => (banner.hidden = true) }, 'Dismiss'),
      );
    } catch (e) {
      messages.error(e instanceof ApiError ? e.message : String(e), 'history');
    }
  }

  /**
   * Undoes the restore appended at `seq`: restores the sheet as it was just before it, only if
   * nothing came after the restore (`expectedSeq`), so an undo never drops someone's later edit.
   */
  async function undo(seq: number): Promise<void> {
    try {
      await call('POST', `${api}/restore`, { seq, expectedSeq: seq + 1 });
      banner.hidden = true;
      messages.info('Restore undone.', 'history');
    } catch (e) {
      if (e instanceof ApiError && e.code === 'conflict') {
        banner.hidden = true;
        messages.warn(
          `The sheet was edited after the restore, and Undo would drop those edits. To go back anyway, restore version ${seq - 1} from History.`,
          'undo',
        );
        return;
      }
      messages.error(e instanceof ApiError ? e.message : String(e), 'history');
    }
  }

  function exit(): void {
    ctx.historyAt = undefined;
    diffList.hidden = true;
    grid.readOnly = ctx.viewOnly;
    grid.el.classList.toggle('readonly', ctx.viewOnly);
    banner.hidden = true;
    if (ctx.live) void view.show(ctx.live);
  }

  return { refresh, exit };
}

/** An entry as the list shows it: its number, what it did (60 characters at most), when and who. */
function describe(e: Entry, clientID: () => string): (string | HTMLElement)[] {
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
    const name = (id: unknown) => (id === clientID() ? 'this tab' : `client ${String(id).slice(0, 8)}`);
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
  if (e.type === 'undo') {
    const t = (b.target ?? {}) as { seq?: number };
    what = `${b.redo ? 'redo' : 'undo'} #${t.seq}`;
    if (Number(b.skipped) > 0) what += ` (${b.skipped} left alone)`;
    who = `group ${String(b.clientGroupID).slice(0, 8)}`;
  }
  // The list's version N is the sheet after entry N: a restore to sequence S brings back S - 1.
  if (e.type === 'restore')
    what = Number(b.seq) > 0 ? `restore version #${Number(b.seq) - 1}` : 'restore the empty sheet';
  const when = new Date(e.created);
  return [
    el('span', { className: 'v' }, `#${e.seq}`),
    el('span', { className: 'what' }, what.length > 60 ? `${what.slice(0, 60)}…` : what),
    el('span', { className: 'meta' }, `${when.toLocaleString()} · ${who}`),
  ];
}
