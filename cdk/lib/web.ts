/**
 * The web spreadsheet ships inside the API function: `functions/api` embeds `web/dist` when it
 * is compiled, so the bundle must be built before cargo-lambda bundles the API. `cdk synth` and
 * `cdk deploy` do it here, once per process; `./scripts/dev` and `./scripts/test` run the same
 * script themselves.
 */
import { execFileSync } from 'node:child_process';
import * as path from 'node:path';
import { REPO_ROOT } from './paths';

export const WEB_BUILD_SCRIPT = path.join(REPO_ROOT, 'web', 'build.mjs');

let built = false;

export function buildWebClient(): void {
  if (built) return;
  try {
    execFileSync(process.execPath, [WEB_BUILD_SCRIPT], { cwd: REPO_ROOT, stdio: ['ignore', 'inherit', 'inherit'] });
  } catch (e) {
    throw new Error(`building the web client (node ${WEB_BUILD_SCRIPT}) failed: ${(e as Error).message}`);
  }
  built = true;
}
