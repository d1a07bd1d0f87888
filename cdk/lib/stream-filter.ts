/**
 * The Entry-stream event filter. It is defined once, in `functions/core/src/aws/stream_filter.json`
 * (`{"filters": [<pattern>, ...]}`, `_comment` ignored), and read here so the deployed event-source
 * mapping and the local runner can never disagree.
 */
import * as fs from 'node:fs';
import { STREAM_FILTER_PATH } from './paths';

/** One Lambda event-filter pattern, as EventBridge-style JSON. */
export type FilterPattern = Record<string, unknown>;

export function loadStreamFilterPatterns(file: string = STREAM_FILTER_PATH): FilterPattern[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (err) {
    throw new Error(`cannot read the stream filter ${file}: ${(err as Error).message}`);
  }
  const filters = (parsed as { filters?: unknown } | null)?.filters;
  if (!Array.isArray(filters) || filters.length === 0) {
    throw new Error(`${file}: expected {"filters": [<pattern object>, ...]} with at least one pattern`);
  }
  // Lambda accepts at most 5 filters per event-source mapping (a quota that can be raised, but not by us).
  if (filters.length > 5) {
    throw new Error(`${file}: ${filters.length} filters; an event-source mapping accepts at most 5`);
  }
  filters.forEach((f, i) => {
    if (f === null || typeof f !== 'object' || Array.isArray(f) || Object.keys(f).length === 0) {
      throw new Error(`${file}: filters[${i}] must be a non-empty JSON object (an event pattern)`);
    }
  });
  return filters as FilterPattern[];
}
