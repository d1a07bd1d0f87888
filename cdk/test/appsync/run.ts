/**
 * Runs the poke namespace's handlers (APPSYNC_JS) in the tests, two ways: the modules themselves
 * (`cdk/lib/stack/appsync/*.js`, imported with `@aws-appsync/utils` resolved to the stand-ins
 * beside this file by `hooks.mjs`), and a template's handler code as the local stack runs it
 * (`scripts/lib/appsync_handler.mjs`, one JSON request a line). Also the shared table of grant
 * cases (`cdk/test/fixtures/grants.json`) as subscriptions.
 */
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import { register } from 'node:module';
import * as os from 'node:os';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import { REPO_ROOT } from '../../lib/paths';
import { HANDLERS_DIR } from '../../lib/stack/handlers';
import type { Json } from '../support';

let hooked = false;

/** Imports the handler module `file` of `cdk/lib/stack/appsync/` as it is, against the stand-ins. */
export async function importHandler(file: string): Promise<Json> {
  if (!hooked) {
    register('./hooks.mjs', pathToFileURL(__filename));
    hooked = true;
  }
  return import(pathToFileURL(path.join(HANDLERS_DIR, file)).href);
}

/** Whether `f` returns rather than calls `util.unauthorized()` (the stand-in's `Unauthorized`). */
export async function admits(f: () => unknown): Promise<boolean> {
  const { Unauthorized } = await import(pathToFileURL(path.join(__dirname, 'utils.mjs')).href);
  try {
    f();
    return true;
  } catch (e) {
    if (e instanceof Unauthorized) return false;
    throw e;
  }
}

/** A handler's context for `channel` (a path such as `/sheets/<logId>`) and `identity`. */
export function channelCtx(channel: string, identity: Json | undefined, more: Json = {}): Json {
  return {
    info: { channel: { path: channel, segments: channel.split('/').filter((s) => s !== '') } },
    identity,
    ...more,
  };
}

export interface RunnerRequest {
  readonly phase: 'request' | 'response' | 'publish';
  readonly ctx: Json;
}

export interface RunnerAnswer {
  readonly kind: 'function' | 'resolver' | 'none';
  readonly unauthorized: boolean;
  readonly value: unknown;
}

/**
 * Runs a template's handler `code` (its `CodeHandlers` string) under the local stack's runner,
 * `scripts/lib/appsync_handler.mjs`, with `requests` in order; one answer each.
 */
export function runTemplateHandler(code: string, requests: readonly RunnerRequest[]): RunnerAnswer[] {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sheetlog-handler-'));
  try {
    const file = path.join(dir, 'code.js');
    fs.writeFileSync(file, code);
    const run = spawnSync(process.execPath, [path.join(REPO_ROOT, 'scripts', 'lib', 'appsync_handler.mjs'), file], {
      input: requests.map((r) => `${JSON.stringify(r)}\n`).join(''),
      encoding: 'utf8',
    });
    assert.equal(run.status, 0, run.stderr);
    const answers = run.stdout
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line) as RunnerAnswer & { error?: string });
    assert.equal(answers.length, requests.length, run.stderr);
    for (const a of answers) assert.equal(a.error, undefined, `the runner failed: ${a.error}`);
    return answers;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** One subscription of the shared table: `claim` (the access claim's value) on `channel`. */
export interface GrantCase {
  readonly label: string;
  readonly claim: unknown;
  readonly channel: string;
  /** Whether the grants allow reading the channel's sheet (a non-sheet channel: never). */
  readonly admitted: boolean;
}

/**
 * `cdk/test/fixtures/grants.json` as subscriptions: each case's claim on each of the table's sheets
 * (in lower and upper case: admitted if the case reads that sheet) and on each non-sheet channel.
 * The same file is the API parser's table (functions/api/src/access.rs); only reading matters to a
 * channel, so each case's `read` decides.
 */
export function grantCases(): GrantCase[] {
  const table = JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'fixtures', 'grants.json'), 'utf8')) as {
    logs: string[];
    nonSheetChannels: string[];
    cases: { name: string; claim: unknown; read: string[] }[];
  };
  assert.ok(table.cases.length > 20, 'the table lost its cases');
  return table.cases.flatMap(({ name, claim, read }) => {
    const label = (channel: string) => `${name} (${JSON.stringify(claim)}) on ${channel}`;
    return [
      ...table.logs.flatMap((log) =>
        [`/sheets/${log}`, `/sheets/${log.toUpperCase()}`].map((channel) => ({
          label: label(channel),
          claim,
          channel,
          admitted: read.includes(log),
        })),
      ),
      ...table.nonSheetChannels.map((channel) => ({ label: label(channel), claim, channel, admitted: false })),
    ];
  });
}
