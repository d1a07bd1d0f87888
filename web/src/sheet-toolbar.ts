/**
 * The toolbar's edits of one sheet: insert and delete a row or column at the selection, the
 * selected cell's number format, and the name box that jumps to a cell. Edits are refused in
 * words on a viewer's sheet and in history.
 */
import { colName, parseRef, refOf } from './model';
import { type SheetContext, VIEW_ONLY } from './sheet-context';
import type { SheetView } from './sheet-view';

export function toolbarActions(ctx: SheetContext, view: SheetView): void {
  const { ui, messages } = ctx;
  const { grid, based } = view;
  const guard = (f: () => void) => () => {
    if (ctx.viewOnly) {
      messages.warn(VIEW_ONLY, 'view-only');
      return;
    }
    if (ctx.historyAt !== undefined) {
      messages.warn('History is read-only: go back to the live sheet to edit.');
      return;
    }
    f();
    grid.el.focus();
  };
  ui.insRow.onclick = guard(() =>
    ctx.act((m) => m['insert-rows']({ at: grid.selection.row + 1, count: 1, ...based() })),
  );
  ui.delRow.onclick = guard(() =>
    ctx.act((m) => m['delete-rows']({ at: grid.selection.row + 1, count: 1, ...based() })),
  );
  ui.insCol.onclick = guard(() =>
    ctx.act((m) => m['insert-columns']({ at: colName(grid.selection.col), count: 1, ...based() })),
  );
  ui.delCol.onclick = guard(() =>
    ctx.act((m) => m['delete-columns']({ at: colName(grid.selection.col), count: 1, ...based() })),
  );
  ui.format.onchange = guard(() => {
    const { row, col } = grid.selection;
    const value = view.current(row, col)?.value ?? null;
    ctx.act((m) =>
      m.set({
        cells: [{ ref: refOf(row, col), value, ...(ui.format.value ? { format: ui.format.value } : {}) }],
        ...based(),
      }),
    );
  });
  ui.nameBox.onkeydown = (e) => {
    if (e.key !== 'Enter') return;
    const at = parseRef(ui.nameBox.value);
    if (!at) {
      messages.error(`“${ui.nameBox.value}” is not a cell reference (e.g. B12, or A900000).`);
      return;
    }
    grid.select(at.row, at.col);
    grid.el.focus();
  };
}
