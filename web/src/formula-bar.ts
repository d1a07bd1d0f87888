/**
 * The formula bar of a sheet's page (`ctx.ui.formula`): shows the selected cell's contents and
 * edits them (sheet-view.ts wires it to the grid).
 */
import type { Grid } from './grid';
import { HISTORY_READ_ONLY, type SheetContext, VIEW_ONLY } from './sheet-context';

/**
 * The formula bar: the selected cell's contents (a formula's text, a value as typed), in a box as
 * wide as the page. Typing there and Enter (or Tab) stores it in the cell it was begun in; Esc
 * puts back what the cell holds. While a cell is edited in place, the bar follows its editor.
 */
export function formulaBar(ctx: SheetContext, grid: Grid, edit: (row: number, col: number, text: string) => void) {
  const input = ctx.ui.formula;
  /** The cell being edited in the bar, from its first keystroke. */
  let editing: { row: number; col: number; was: string } | undefined;
  let shownFor = { row: 0, col: 0, text: '' };
  const commit = () => {
    const e = editing;
    editing = undefined;
    if (e && input.value !== e.was) edit(e.row, e.col, input.value);
  };
  input.addEventListener('input', () => {
    if (!editing) editing = { ...shownFor, was: shownFor.text };
  });
  input.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' || e.key === 'Tab') {
      e.preventDefault();
      if (grid.readOnly) {
        ctx.messages.warn(ctx.viewOnly ? VIEW_ONLY : HISTORY_READ_ONLY, 'read-only');
        return;
      }
      const at = editing ?? shownFor;
      commit();
      grid.el.focus();
      if (e.key === 'Enter') grid.select(at.row + (e.shiftKey ? -1 : 1), at.col);
      else grid.select(at.row, at.col + (e.shiftKey ? -1 : 1));
    } else if (e.key === 'Escape') {
      e.preventDefault();
      editing = undefined;
      input.value = shownFor.text;
      grid.el.focus();
    }
  });
  // Clicking elsewhere keeps what was typed, as spreadsheets do.
  input.addEventListener('blur', () => {
    if (editing && !grid.readOnly) commit();
    editing = undefined;
  });
  return {
    /** The selected cell's contents, unless the bar is being typed in. */
    show(row: number, col: number, text: string): void {
      shownFor = { row, col, text };
      input.readOnly = grid.readOnly;
      if (!editing && input.value !== text) input.value = text;
    },
    /** The in-place editor's text as it is typed. */
    mirror(text: string): void {
      if (!editing) input.value = text;
    },
  };
}
