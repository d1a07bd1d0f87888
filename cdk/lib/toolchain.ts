/**
 * What synthesizing with real bundling needs besides Node.js: `cargo lambda` (and, through it, the
 * Rust toolchain). Plain `npx cdk synth` / `npx cdk deploy` after `npm ci` must work on a fresh
 * clone, so when `cargo lambda` is on neither PATH nor the project venv, it is installed there from
 * PyPI (the version `scripts/lib/common.sh` pins), the way the scripts do it.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { SetupError } from './errors';
import { REPO_ROOT } from './paths';

const COMMON_SH = path.join(REPO_ROOT, 'scripts', 'lib', 'common.sh');

/** The cargo-lambda version the scripts pin (`CARGO_LAMBDA_VERSION` in scripts/lib/common.sh). */
export function pinnedCargoLambdaVersion(): string {
  const text = fs.readFileSync(COMMON_SH, 'utf8');
  const m = /^CARGO_LAMBDA_VERSION="([0-9][0-9A-Za-z.+-]*)"$/m.exec(text);
  if (!m) throw new SetupError(`${COMMON_SH}: no CARGO_LAMBDA_VERSION="…" line`);
  return m[1];
}

function cargoLambdaWorks(env: NodeJS.ProcessEnv): boolean {
  const probe = spawnSync('cargo', ['lambda', '--version'], { encoding: 'utf8', env });
  return !probe.error && probe.status === 0;
}

function withPath(dir: string, env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const PATH = env.PATH ?? '';
  return PATH.split(path.delimiter).includes(dir) ? env : { ...env, PATH: `${dir}${path.delimiter}${PATH}` };
}

function run(command: string, args: string[], what: string): void {
  const r = spawnSync(command, args, { stdio: ['ignore', 'inherit', 'inherit'] });
  if (r.error || r.status !== 0) {
    const why = r.error ? r.error.message : `exit ${r.status}`;
    throw new SetupError(`${what} failed (${why}). ${INSTALL_BY_HAND}`);
  }
}

const INSTALL_BY_HAND =
  'Install it by hand with `python3 -m venv .venv && .venv/bin/pip install cargo-lambda==' +
  '<version in scripts/lib/common.sh>` and put .venv/bin on PATH (docs/deploy.md).';

/** Roots already checked in this process. */
const ensured = new Set<string>();

/**
 * Makes `cargo lambda` runnable for this process and the ones it starts (cargo-lambda-cdk spawns
 * `cargo lambda build`): on PATH already, or in `<root>/.venv/bin`, or installed there now.
 * Without `cargo` itself it stops with a message, since nothing can be built then.
 */
export function ensureCargoLambda(root: string = REPO_ROOT, log: (line: string) => void = console.error): void {
  if (ensured.has(root)) return;
  const probeCargo = spawnSync('cargo', ['--version'], { encoding: 'utf8' });
  if (probeCargo.error || probeCargo.status !== 0) {
    throw new SetupError(
      '`cargo` is not on PATH: the functions are Rust and are compiled while the stack is synthesized. ' +
        'Install Rust with rustup (https://rustup.rs), then run this again.',
    );
  }
  const venvBin = path.join(root, '.venv', 'bin');
  if (!cargoLambdaWorks(process.env)) {
    if (!fs.existsSync(path.join(venvBin, 'cargo-lambda'))) {
      const version = pinnedCargoLambdaVersion();
      log(`==> cargo-lambda is not installed: installing cargo-lambda ${version} into ${venvBin} (once)`);
      if (!fs.existsSync(path.join(venvBin, 'python'))) {
        run('python3', ['-m', 'venv', path.join(root, '.venv')], 'Creating the Python venv (python3 -m venv .venv)');
      }
      run(
        path.join(venvBin, 'pip'),
        ['install', '--quiet', `cargo-lambda==${version}`],
        `pip install cargo-lambda==${version}`,
      );
    }
    const env = withPath(venvBin, process.env);
    if (!cargoLambdaWorks(env)) {
      throw new SetupError(`${venvBin}/cargo-lambda is there but \`cargo lambda --version\` fails. ${INSTALL_BY_HAND}`);
    }
    process.env.PATH = env.PATH;
  }
  ensured.add(root);
}
