/**
 * The elements of one sheet's page: the toolbar (format picker, style controls, edit buttons, import, export,
 * history, progress, save status, link state), the formula bar (name box and the selected cell's
 * contents), the banner, the grid's host and the history panel. Only the elements: what they do
 * is wired by the other `sheet-*.ts` modules.
 */
import type { Grid } from './grid';
import { type StyleControls, styleControls } from './styles';
import { el } from './ui';

/** The number formats the picker offers: [code, label]. */
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

export interface SheetLayout {
  nameBox: HTMLInputElement;
  formula: HTMLInputElement;
  format: HTMLSelectElement;
  /** Bold, italic, underline, strike, wrap, size, colours, alignment, borders (styles.ts). */
  styles: StyleControls;
  undoBtn: HTMLButtonElement;
  redoBtn: HTMLButtonElement;
  insRow: HTMLButtonElement;
  delRow: HTMLButtonElement;
  insCol: HTMLButtonElement;
  delCol: HTMLButtonElement;
  freeze: HTMLButtonElement;
  fileInput: HTMLInputElement;
  importLabel: HTMLLabelElement;
  exportBtn: HTMLButtonElement;
  xlsxBtn: HTMLButtonElement;
  historyBtn: HTMLButtonElement;
  progress: HTMLProgressElement;
  progressText: HTMLSpanElement;
  status: HTMLSpanElement;
  link: HTMLSpanElement;
  banner: HTMLDivElement;
  gridHost: HTMLDivElement;
  historyList: HTMLOListElement;
  /** The sheet's named versions, above the slider and the entries. */
  namedList: HTMLOListElement;
  /** What a compare found: the cells that differ between a version and the live sheet. */
  diffList: HTMLDivElement;
  slider: HTMLInputElement;
  historyPanel: HTMLElement;
}

export interface LayoutOptions {
  /** The sheet's name, shown instead of its id. */
  name?: string;
  /** A viewer's sheet: the toolbar shows a "View only" badge. */
  viewOnly: boolean;
  /** More toolbar controls, at its end. */
  actions?: HTMLElement[];
}

/** Builds the toolbar's controls. */
function toolbarControls() {
  const nameBox = el('input', {
    className: 'namebox',
    value: 'A1',
    title: 'Go to a cell (e.g. A900000)',
    ariaLabel: 'cell reference',
  });
  const formula = el('input', {
    className: 'formula',
    ariaLabel: 'formula bar',
    spellcheck: false,
    autocomplete: 'off',
    title: "The selected cell's contents: a formula's text (=SUM(A1:A3)), or its value as typed. Enter stores an edit.",
  });
  const format = el('select', { ariaLabel: 'number format', title: 'Number format of the selected cell' });
  for (const [code, label] of FORMATS) format.append(el('option', { value: code, textContent: label }));
  const button = (text: string, title: string) => el('button', { type: 'button', textContent: text, title });
  const undoBtn = button('↶', 'Undo your last change (Ctrl+Z); other people’s changes stay');
  const redoBtn = button('↷', 'Redo what you undid (Ctrl+Shift+Z)');
  undoBtn.ariaLabel = 'undo';
  redoBtn.ariaLabel = 'redo';
  const insRow = button('+ Row', 'Insert a row above the selected cell');
  const delRow = button('− Row', "Delete the selected cell's row");
  const insCol = button('+ Column', 'Insert a column left of the selected cell');
  const delCol = button('− Column', "Delete the selected cell's column");
  const freeze = button(
    'Freeze',
    'Keep the rows above and the columns left of the selected cell in view while scrolling (again: unfreeze)',
  );
  freeze.ariaLabel = 'freeze panes';
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
  const xlsxBtn = button(
    'Download XLSX',
    'Download the sheet as shown as an Excel workbook: values, formulas with their values, number formats',
  );
  const historyBtn = button('History', 'See the sheet as it was at any version');
  const progress = el('progress', { className: 'progress', hidden: true, max: 1 });
  const progressText = el('span', { className: 'progress-text' });
  const status = el('span', { className: 'status', role: 'status' });
  const link = el('span', { className: 'link', title: 'How this page hears of other people’s edits' });
  return {
    nameBox,
    formula,
    format,
    styles: styleControls(),
    undoBtn,
    redoBtn,
    insRow,
    delRow,
    insCol,
    delCol,
    freeze,
    fileInput,
    importLabel,
    exportBtn,
    xlsxBtn,
    historyBtn,
    progress,
    progressText,
    status,
    link,
  };
}

/** Builds a sheet's page into `root` (replacing what it held) and returns its elements. */
export function sheetLayout(root: HTMLElement, logId: string, opts: LayoutOptions): SheetLayout {
  const c = toolbarControls();
  const banner = el('div', { className: 'banner', hidden: true });
  const gridHost = el('div', { className: 'grid-host' });
  const historyList = el('ol', { className: 'history-list' });
  const namedList = el('ol', { className: 'history-list named' });
  const diffList = el('div', { className: 'diff', hidden: true });
  const slider = el('input', { type: 'range', min: '0', max: '0', value: '0', ariaLabel: 'version' });
  const historyPanel = el(
    'aside',
    { className: 'history', hidden: true },
    el('h2', {}, 'History'),
    el('p', { className: 'hint' }, 'Pick a version to see the sheet as it was after it (read-only).'),
    diffList,
    namedList,
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
      ...(opts.viewOnly
        ? [el('span', { className: 'badge view-only', title: 'Your role is viewer' }, 'View only')]
        : []),
      c.undoBtn,
      c.redoBtn,
      c.format,
      el('span', { className: 'style-controls', role: 'group', ariaLabel: 'cell style' }, ...Object.values(c.styles)),
      c.insRow,
      c.delRow,
      c.insCol,
      c.delCol,
      c.freeze,
      c.importLabel,
      c.exportBtn,
      c.xlsxBtn,
      c.historyBtn,
      c.progress,
      c.progressText,
      c.status,
      c.link,
      ...(opts.actions ?? []),
    ),
    el(
      'div',
      { className: 'formula-bar' },
      c.nameBox,
      el('span', { className: 'fx', title: 'Formula bar', ariaHidden: 'true' }, 'fx'),
      c.formula,
    ),
    banner,
    el('main', { className: 'sheet' }, gridHost, historyPanel),
  );
  return { ...c, banner, gridHost, historyList, namedList, diffList, slider, historyPanel };
}

/** A viewer's sheet: the grid takes no typing and the edit controls and import are off. */
export function lockForViewer(ui: SheetLayout, grid: Grid): void {
  grid.readOnly = true;
  grid.el.classList.add('readonly');
  grid.el.dataset.readOnly = 'true';
  for (const b of [
    ui.undoBtn,
    ui.redoBtn,
    ui.insRow,
    ui.delRow,
    ui.insCol,
    ui.delCol,
    ui.freeze,
    ui.format,
    ui.fileInput,
  ])
    b.disabled = true;
  for (const c of Object.values(ui.styles)) c.disabled = true;
  ui.formula.readOnly = true;
  ui.importLabel.hidden = true;
}
