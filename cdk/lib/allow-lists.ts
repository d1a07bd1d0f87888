/**
 * The IAM allow-lists next to each function's code (`functions/<crate>/iam-allow-list.json`, and
 * the API's `iam-allow-list.cognito.json` for a cognito stack): by resource (logical id, or
 * bucket/prefix), each action with the call that needs it; `_untested` names the grants no run of
 * `./scripts/test` exercises yet. Read by `cdk/test/iam.test.ts` (the template grants exactly
 * these) and `cdk/bin/iam-calls.ts` (the recorded calls use them).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { FunctionCrate } from './constructs/sheetlog-function';

export const FUNCTIONS_DIR = path.resolve(__dirname, '..', '..', 'functions');

export interface AllowList {
  /** Resource → action → why. */
  grants: Record<string, Record<string, unknown>>;
  /** `<action> on <resource>` → what needs it, for grants no test run exercises yet. */
  untested: Record<string, unknown>;
}

/** One allow-list file; keys starting with `_` are notes, not resources. */
export function readAllowList(file: string): AllowList {
  const parsed = JSON.parse(fs.readFileSync(file, 'utf8')) as Record<string, unknown>;
  const grants: AllowList['grants'] = {};
  for (const [resource, actions] of Object.entries(parsed)) {
    if (resource.startsWith('_')) continue;
    grants[resource] = actions as Record<string, unknown>;
  }
  return { grants, untested: (parsed._untested ?? {}) as Record<string, unknown> };
}

/** A crate's allow-list files that exist: its own, and the cognito one when `cognito`. */
export function allowListFiles(crate: FunctionCrate, cognito: boolean): string[] {
  const names = cognito ? ['iam-allow-list.json', 'iam-allow-list.cognito.json'] : ['iam-allow-list.json'];
  return names.map((n) => path.join(FUNCTIONS_DIR, crate.dir, n)).filter((f) => fs.existsSync(f));
}
