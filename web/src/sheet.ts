/**
 * One sheet: openSheet builds its page and wires its parts together through a `SheetContext`
 * (sheet-context.ts): the elements (sheet-layout.ts), the views and blocks the grid shows
 * (sheet-view.ts), sync through Replicache with pokes and the save status (sheet-sync.ts), the
 * toolbar's edits (sheet-toolbar.ts), undo and redo (sheet-undo.ts), import and export
 * (sheet-transfer.ts) and the history panel (sheet-history.ts).
 */
import { ApiError, authMode, call, type Extent } from './api';
import type { SheetContext } from './sheet-context';
import { sheetHistory } from './sheet-history';
import { lockForViewer, sheetLayout } from './sheet-layout';
import { startSync } from './sheet-sync';
import { toolbarActions } from './sheet-toolbar';
import { exportAction, importAction, xlsxAction } from './sheet-transfer';
import { undoActions } from './sheet-undo';
import { sheetView } from './sheet-view';
import { remember } from './sheets';
import { el, type Messages } from './ui';

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
  /** The sheet's members or roles changed (cognito mode: the role check runs at once). */
  onMembers?: () => void;
}

export async function openSheet(
  root: HTMLElement,
  logId: string,
  messages: Messages,
  opts: SheetOptions = {},
): Promise<void> {
  // In cognito mode the server lists the sheets; elsewhere this browser remembers them.
  if (authMode() !== 'cognito') remember(logId);
  const viewOnly = opts.readOnly === true;
  const ui = sheetLayout(root, logId, { name: opts.name, viewOnly, actions: opts.actions });
  const ctx: SheetContext = {
    logId,
    api: `/logs/${logId}`,
    messages,
    viewOnly,
    ui,
    live: undefined,
    shown: undefined,
    historyAt: undefined,
    act: () => {},
    onMembers: opts.onMembers,
  };

  // Fail early and in words when the sheet does not exist or this token cannot read it.
  try {
    await call<Extent>('GET', `${ctx.api}/extent`);
  } catch (e) {
    messages.error(e instanceof ApiError ? e.message : String(e));
    root.querySelector('main')?.replaceChildren(el('p', { className: 'empty' }, 'This sheet cannot be opened.'));
    return;
  }

  const view = sheetView(ctx);
  const { grid } = view;
  // Replicache answers after openSheet has returned, so `history` below is set by then.
  const sync = startSync(ctx, grid, opts.user, (v) => {
    if (ctx.historyAt === undefined) void view.show(v);
    if (!ui.historyPanel.hidden) void history.refresh();
  });
  toolbarActions(ctx, view);
  undoActions(ctx, sync.rep, grid.el);
  const history = sheetHistory(
    ctx,
    view,
    () => sync.rep.clientID,
    () => sync.rep.clientGroupID,
  );
  importAction(ctx, history.exit, () => sync.rep.clientGroupID);
  exportAction(ctx);
  xlsxAction(ctx);
  if (viewOnly) lockForViewer(ui, grid);
  grid.el.focus();
  grid.schedule();
}
