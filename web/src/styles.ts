/**
 * Cell styles in the page: the server's JSON form (functions/sheet/src/style.rs), a patch applied
 * as the server applies it, a pending patch drawn over the cell read, the CSS a styled cell is
 * drawn with, and the toolbar's style controls.
 *
 * A `style` mutation names ranges and a patch: each field given is set (`null` or `false`
 * clears it), the rest stay, and a value edit never changes a cell's look. While one is pending,
 * its patch waits under `style/<ref>` in Replicache's store (the mutator is in model.ts),
 * composed with any earlier pending patch of the same cell, and is drawn over the cell read from
 * the server.
 */
import { el } from './ui';

export type Line = 'thin' | 'medium' | 'thick' | 'dashed' | 'dotted' | 'double';
export type Border = {
  style: Line;
  color?: string;
};
export type Side = 'top' | 'right' | 'bottom' | 'left';
export const SIDES: Side[] = ['top', 'right', 'bottom', 'left'];

// Types, not interfaces: Replicache stores them, and only a type is a JSON value to TypeScript.
export type Style = {
  bold?: boolean;
  italic?: boolean;
  underline?: boolean;
  strike?: boolean;
  wrap?: boolean;
  fontSize?: number;
  color?: string;
  fill?: string;
  hAlign?: 'left' | 'center' | 'right';
  vAlign?: 'top' | 'middle' | 'bottom';
  border?: Partial<Record<Side, Border>>;
};

/** What a `style` entry changes: fields given are set, `null` clears; `format` is the number format. */
export type StylePatch = {
  [K in Exclude<keyof Style, 'border'>]?: Style[K] | null;
} & {
  border?: Partial<Record<Side, Border | null>>;
  format?: string | null;
};

/** A cell as far as its look goes (model.ts's `Cell`). */
export interface Styled<V> {
  value: V;
  format?: string;
  style?: Style;
}

const FIELDS = [
  'bold',
  'italic',
  'underline',
  'strike',
  'wrap',
  'fontSize',
  'color',
  'fill',
  'hAlign',
  'vAlign',
] as const;

/** The style `base` becomes under `p`; undefined when that is no style at all (as the server keeps it). */
export function patched(base: Style | undefined, p: StylePatch): Style | undefined {
  const out: Record<string, unknown> = { ...base };
  for (const k of FIELDS) {
    if (!(k in p)) continue;
    const v = p[k];
    if (v === null || v === false || v === undefined) delete out[k];
    else out[k] = v;
  }
  if (p.border) {
    const border: Partial<Record<Side, Border>> = { ...base?.border };
    for (const s of SIDES) {
      if (!(s in p.border)) continue;
      const b = p.border[s];
      if (b) border[s] = b;
      else delete border[s];
    }
    if (Object.keys(border).length) out.border = border;
    else delete out.border;
  }
  return Object.keys(out).length ? (out as Style) : undefined;
}

/** `a` then `b`, as one patch. */
export function compose(a: StylePatch, b: StylePatch): StylePatch {
  const border = a.border || b.border ? { ...a.border, ...b.border } : undefined;
  return { ...a, ...b, ...(border ? { border } : {}) };
}

/** A cell (or an empty place, `value` null) under a patch: its value kept, its look and format changed. */
export function restyled<V>(cell: Styled<V> | undefined, p: StylePatch, empty: V): Styled<V> | undefined {
  const style = patched(cell?.style, p);
  const format = 'format' in p ? (p.format ?? undefined) : cell?.format;
  const value = cell ? cell.value : empty;
  if (value === empty && !format && !style) return undefined;
  return { value, ...(format ? { format } : {}), ...(style ? { style } : {}) };
}

/**
 * The cell a view shows: the server's `base`, or the pending edit `own` over it (a value edit
 * keeps the cell's look), then any pending style patch.
 */
export function overlaid<V>(
  base: Styled<V> | undefined,
  own: Styled<V> | undefined,
  patch: StylePatch | undefined,
  empty: V,
): Styled<V> | undefined {
  const cell = own ? { ...own, ...(base?.style && !own.style ? { style: base.style } : {}) } : base;
  return patch ? restyled(cell, patch, empty) : cell;
}

const WIDTHS: Record<Line, string> = {
  thin: '1px solid',
  medium: '2px solid',
  thick: '3px solid',
  dashed: '1px dashed',
  dotted: '1px dotted',
  double: '3px double',
};
const SIDE_CSS: Record<Side, 'borderTop' | 'borderRight' | 'borderBottom' | 'borderLeft'> = {
  top: 'borderTop',
  right: 'borderRight',
  bottom: 'borderBottom',
  left: 'borderLeft',
};

/** Draws a grid cell's element with `s` (nothing for a plain cell). */
export function paint(cell: HTMLElement, s: Style | undefined): void {
  if (!s) return;
  const css = cell.style;
  if (s.bold) css.fontWeight = '700';
  if (s.italic) css.fontStyle = 'italic';
  const lines = [s.underline ? 'underline' : '', s.strike ? 'line-through' : ''].filter(Boolean);
  if (lines.length) css.textDecoration = lines.join(' ');
  if (s.fontSize) css.fontSize = `${s.fontSize}pt`;
  if (s.color) css.color = s.color;
  if (s.fill) css.background = s.fill;
  if (s.hAlign) css.textAlign = s.hAlign;
  if (s.vAlign) {
    // The text as one column, placed up or down the cell (its horizontal alignment inherited).
    css.display = 'flex';
    css.flexDirection = 'column';
    css.justifyContent = { top: 'flex-start', middle: 'center', bottom: 'flex-end' }[s.vAlign];
  }
  if (s.wrap) {
    css.whiteSpace = 'normal';
    css.overflowWrap = 'anywhere';
  }
  for (const side of SIDES) {
    const b = s.border?.[side];
    if (b) css[SIDE_CSS[side]] = `${WIDTHS[b.style]} ${b.color ?? '#000'}`;
  }
  cell.dataset.style = JSON.stringify(s);
}

/** The toolbar's style controls. */
export function styleControls() {
  const toggle = (text: string, title: string, label: string) =>
    el('button', { type: 'button', textContent: text, title, ariaLabel: label, className: 'style-toggle' });
  const bold = toggle('B', 'Bold (Ctrl+B)', 'bold');
  bold.style.fontWeight = '700';
  const italic = toggle('I', 'Italic (Ctrl+I)', 'italic');
  italic.style.fontStyle = 'italic';
  const underline = toggle('U', 'Underline (Ctrl+U)', 'underline');
  underline.style.textDecoration = 'underline';
  const strike = toggle('S', 'Strikethrough', 'strikethrough');
  strike.style.textDecoration = 'line-through';
  const wrap = toggle('↵', 'Wrap long text onto more lines', 'wrap');
  const fontSize = el('select', { ariaLabel: 'font size', title: 'Font size (points)' });
  for (const s of ['', '8', '9', '10', '11', '12', '14', '18', '24', '36'])
    fontSize.append(el('option', { value: s, textContent: s || 'Size' }));
  const color = el('input', { type: 'color', value: '#000000', title: 'Text colour', ariaLabel: 'text colour' });
  const fill = el('input', { type: 'color', value: '#ffffff', title: 'Fill colour', ariaLabel: 'fill colour' });
  const align = el('select', { ariaLabel: 'alignment', title: 'Horizontal alignment' });
  for (const [v, t] of [
    ['', 'Align'],
    ['left', 'Left'],
    ['center', 'Centre'],
    ['right', 'Right'],
  ])
    align.append(el('option', { value: v, textContent: t }));
  const border = el('select', { ariaLabel: 'borders', title: 'Borders of the selected cell' });
  for (const [v, t] of [
    ['', 'Borders'],
    ['bottom', 'Bottom'],
    ['all', 'All sides'],
    ['none', 'None'],
  ])
    border.append(el('option', { value: v, textContent: t }));
  const clear = el('button', { type: 'button', textContent: 'Clear style', title: 'Back to a plain cell' });
  return { bold, italic, underline, strike, wrap, fontSize, color, fill, align, border, clear };
}
export type StyleControls = ReturnType<typeof styleControls>;

/** The patch a control asks for, given the selected cell's style now. */
export function controlPatch(
  which: keyof StyleControls,
  now: Style | undefined,
  value: string,
): StylePatch | undefined {
  switch (which) {
    case 'bold':
    case 'italic':
    case 'underline':
    case 'strike':
    case 'wrap':
      return { [which]: !now?.[which] };
    case 'fontSize':
      return { fontSize: value ? Number(value) : null };
    case 'color':
      return { color: value };
    case 'fill':
      return { fill: value.toLowerCase() === '#ffffff' ? null : value };
    case 'align':
      return { hAlign: (value || null) as Style['hAlign'] | null };
    case 'border': {
      if (!value) return undefined;
      const thin: Border = { style: 'thin' };
      if (value === 'none') return { border: { top: null, right: null, bottom: null, left: null } };
      if (value === 'bottom') return { border: { bottom: thin } };
      return { border: { top: thin, right: thin, bottom: thin, left: thin } };
    }
    case 'clear': {
      const p: StylePatch = { border: { top: null, right: null, bottom: null, left: null } };
      for (const k of FIELDS) (p as Record<string, null>)[k] = null;
      return p;
    }
  }
}

/** Shows the selected cell's style on the controls: toggles pressed, sizes and alignment picked. */
export function reflect(c: StyleControls, s: Style | undefined): void {
  for (const k of ['bold', 'italic', 'underline', 'strike', 'wrap'] as const)
    c[k].setAttribute('aria-pressed', s?.[k] ? 'true' : 'false');
  c.fontSize.value = s?.fontSize ? String(s.fontSize) : '';
  c.align.value = s?.hAlign ?? '';
  c.color.value = s?.color ?? '#000000';
  c.fill.value = s?.fill ?? '#ffffff';
  c.border.value = '';
}
