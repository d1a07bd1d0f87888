/**
 * The page's CSV export: fields quoted as RFC 4180 says, values as a spreadsheet program reads
 * them back, and texts that would run as formulas neutralised.
 */
import type { Value } from './model';

/** One CSV field, quoted when it must be (RFC 4180). */
export function csvField(text: string): string {
  return /[",\r\n]/.test(text) || /^\s|\s$/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

/**
 * Texts a spreadsheet program would run as a formula when it opens the CSV (`=HYPERLINK(…)`, a
 * DDE payload, `@SUM(…)`; tab and carriage return can hide one): OWASP's "CSV injection" list.
 */
const FORMULA_START = /^[=+\-@\t\r]/;

/** A text as an exported CSV field holds it: with a leading `'` if it would run as a formula, unless `raw`. */
export function neutralise(text: string, raw = false): string {
  return !raw && FORMULA_START.test(text) ? `'${text}` : text;
}

/**
 * A value as an exported CSV field holds it: raw numbers (-1.5 stays a number), not their
 * formatted text; texts neutralised unless `raw` (see `neutralise`).
 */
export function csvValue(v: Value, raw = false): string {
  if (v === null) return '';
  if (typeof v === 'boolean') return v ? 'TRUE' : 'FALSE';
  if (typeof v === 'object') return v.error;
  if (typeof v === 'number') return csvField(String(v));
  return csvField(neutralise(v, raw));
}
