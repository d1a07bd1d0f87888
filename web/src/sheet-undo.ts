/**
 * Undo and redo of this person's own changes (Ctrl+Z, Ctrl+Shift+Z or Ctrl+Y, and the toolbar's
 * ↶ ↷). The server keeps the stacks: they are derived from the log for this page's Replicache
 * client group, so they survive a reload (docs/sync.md, "Undo and redo"). Edits still pending
 * are sent first, so an undo never overtakes the change it is meant to take back.
 */
import type { Replicache } from 'replicache';
import { ApiError, call } from './api';
import type { Mutators } from './model';
import { type SheetContext, VIEW_ONLY } from './sheet-context';

/** How long an undo waits for the edits before it to be saved. */
const FLUSH_MS = 15_000;

interface UndoAnswer {
  skipped: number;
  changed: string[];
  events: unknown[];
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export function undoActions(ctx: SheetContext, rep: Replicache<Mutators>, focus: HTMLElement): void {
  const { ui, messages } = ctx;
  // One at a time, in the order asked: a second Ctrl+Z waits for the first.
  let queue = Promise.resolve();
  const run = (redo: boolean) => {
    if (ctx.viewOnly) {
      messages.warn(VIEW_ONLY, 'view-only');
      return;
    }
    if (ctx.historyAt !== undefined) {
      messages.warn('History is read-only: go back to the live sheet to undo.');
      return;
    }
    queue = queue.then(() => act(ctx, rep, redo)).catch(() => {});
  };
  ui.undoBtn.onclick = () => {
    run(false);
    focus.focus();
  };
  ui.redoBtn.onclick = () => {
    run(true);
    focus.focus();
  };
  focus.addEventListener('keydown', (e) => {
    if (e.target !== focus || !(e.ctrlKey || e.metaKey) || e.altKey) return;
    const key = e.key.toLowerCase();
    if (key === 'z' || key === 'y') {
      e.preventDefault();
      run(key === 'y' || e.shiftKey);
    }
  });
}

async function act(ctx: SheetContext, rep: Replicache<Mutators>, redo: boolean): Promise<void> {
  const { messages } = ctx;
  const what = redo ? 'redo' : 'undo';
  try {
    const deadline = Date.now() + FLUSH_MS;
    while ((await rep.experimentalPendingMutations()).length > 0) {
      if (Date.now() > deadline) {
        messages.warn(`Your last edits are not saved yet, so there is nothing to ${what} yet: try again.`, 'undo');
        return;
      }
      await sleep(50);
    }
    const clientGroupId = await rep.clientGroupID;
    const r = await call<UndoAnswer>('POST', `${ctx.api}/${what}`, { clientGroupId });
    messages.dismiss('undo');
    if (r.skipped > 0) {
      const cells = r.changed.length ? ` (${r.changed.slice(0, 5).join(', ')}${r.changed.length > 5 ? '…' : ''})` : '';
      const none = r.events.length === 0;
      messages.warn(
        none
          ? `Nothing was ${redo ? 'redone' : 'undone'}: someone else has changed or deleted what it touched since${cells}.`
          : `${r.skipped} cell${r.skipped === 1 ? ' was' : 's were'} left as they are: someone else has changed or deleted ${r.skipped === 1 ? 'it' : 'them'} since${cells}.`,
        'undo',
      );
    }
    // Pokes bring the undo too; pulling now shows it without waiting for one.
    await rep.pull({ now: true }).catch(() => {});
  } catch (e) {
    if (e instanceof ApiError && (e.code === 'nothing-to-undo' || e.code === 'nothing-to-redo')) {
      messages.info(`Nothing to ${what}.`, 'undo');
    } else {
      messages.error(`Could not ${what}: ${e instanceof Error ? e.message : String(e)}`, 'undo');
    }
  }
}
