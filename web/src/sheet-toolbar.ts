/**
 * The toolbar's edits of one sheet: insert and delete a row or column at the selection, the
 * number format and style of the selected cell or range (Ctrl+B, Ctrl+I, Ctrl+U too), and the
 * name box that jumps to a cell. Edits are refused in
 * words on a viewer's sheet and in history.
 */
import { colName, parseRef, refOf } from './model';
import { HISTORY_READ_ONLY, type SheetContext, VIEW_ONLY } from './sheet-context';
import type { SheetView } from './sheet-view';
import { controlPatch, type StyleControls, type StylePatch } from './styles';

/** Cells one style change may cover (`MAX_CELLS_PER_STYLE`, functions/sheet/src/limits.rs). */
const MAX_STYLED_CELLS = 100_000;

export function toolbarActions(ctx: SheetContext, view: SheetView): void {
  const { ui, messages } = ctx;
  const { grid, based } = view;
  const guard = (f: () => void) => () => {
    if (ctx.viewOnly) {
      messages.warn(VIEW_ONLY, 'view-only');
      return;
    }
    if (ctx.historyAt !== undefined) {
      messages.warn(HISTORY_READ_ONLY);
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
  // Freeze at the selected cell as spreadsheets do (the rows above it, the columns left of it);
  // with a split already there, unfreeze.
  ui.freeze.onclick = guard(() => {
    const frozen = grid.el.dataset.frozen ?? '0,0';
    const { row, col } = grid.selection;
    ctx.act((m) => m.freeze(frozen === '0,0' ? { rows: row, columns: col } : { rows: 0, columns: 0 }));
  });
  // Number formats and styles change how the selected cell looks, never its value: a `style`
  // mutation, which cannot race someone typing into the cell.
  const restyle = (patch: StylePatch | undefined) => {
    if (!patch) return;
    const { r0, c0, r1, c1 } = grid.range;
    const cells = (r1 - r0 + 1) * (c1 - c0 + 1);
    if (cells > MAX_STYLED_CELLS) {
      messages.error(
        `The selection is ${cells.toLocaleString('en')} cells; a style changes at most ${MAX_STYLED_CELLS.toLocaleString('en')} at once.`,
      );
      return;
    }
    const range = cells === 1 ? refOf(r0, c0) : `${refOf(r0, c0)}:${refOf(r1, c1)}`;
    ctx.act((m) => m.style({ ranges: [range], style: patch, ...based() }));
  };
  ui.format.onchange = guard(() => restyle({ format: ui.format.value || null }));
  const now = () => view.current(grid.selection.row, grid.selection.col)?.style;
  for (const [name, control] of Object.entries(ui.styles) as [keyof StyleControls, HTMLInputElement][]) {
    const act = guard(() => restyle(controlPatch(name, now(), control.value)));
    if (control instanceof HTMLButtonElement) control.onclick = act;
    else control.onchange = act;
  }
  grid.el.addEventListener('keydown', (e) => {
    const key = { b: 'bold', i: 'italic', u: 'underline' }[e.key.toLowerCase()] as keyof StyleControls | undefined;
    if (!key || !(e.ctrlKey || e.metaKey) || e.altKey || e.shiftKey) return;
    e.preventDefault();
    guard(() => restyle(controlPatch(key, now(), '')))();
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
