/**
 * What the parts of one open sheet share: the sheet, the message area, the page's elements, the
 * views (what Replicache says, what the grid shows, the history version pinned) and the way an
 * edit is run. openSheet (sheet.ts) makes one per sheet and hands it to each part.
 */
import type { Replicache } from 'replicache';
import type { LocalView, Mutators } from './model';
import type { SheetLayout } from './sheet-layout';
import type { Messages } from './ui';

/** Replicache's mutators, as an edit calls them. */
export type Mutate = Replicache<Mutators>['mutate'];

export interface SheetContext {
  readonly logId: string;
  /** The sheet's routes: `/logs/<logId>`. */
  readonly api: string;
  readonly messages: Messages;
  /** A viewer's sheet: nothing can be edited and nothing is pushed. */
  readonly viewOnly: boolean;
  readonly ui: SheetLayout;
  /** The live view: Replicache's `meta/seq` and pending edits, once it has answered. */
  live: LocalView | undefined;
  /** The view the grid draws (its blocks in view read). */
  shown: LocalView | undefined;
  /** The sequence history shows (`seq + 1` of the entry picked); undefined while live. */
  historyAt: number | undefined;
  /**
   * Runs an edit, counting it as pending from this moment (before Replicache has it). A no-op
   * until sheet-sync.ts wires Replicache.
   */
  act: (f: (mutate: Mutate) => Promise<unknown>) => void;
  /** The sheet's members or roles changed (a poke said so): the page checks its role again. */
  readonly onMembers?: () => void;
}

/** What a viewer is told when they try to edit. */
export const VIEW_ONLY = 'You can view this sheet but not edit it: ask its owner to make you an editor.';
/** What an edit tried on a version in history is told. */
export const HISTORY_READ_ONLY = 'History is read-only: go back to the live sheet to edit.';
