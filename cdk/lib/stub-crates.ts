/**
 * Stub function crates for synthesizing with bundling skipped (tests, `local-resources`).
 * `RustFunction` reads each crate's Cargo.toml even when it will not build it; with bundling
 * skipped nothing else of the crate is used, so a manifest naming the package is enough, and the
 * template does not depend on whether the real crates exist yet.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { FunctionCrate } from './constructs/sheetlog-function';
import { ARCHIVER_CRATE, CRATES } from './sheetlog-stack';

let stubDir: string | undefined;

/** A temporary folder with `<dir>/Cargo.toml` for every crate in `CRATES`; created once per process. */
export function stubFunctionsDir(crates: FunctionCrate[] = [...Object.values(CRATES), ARCHIVER_CRATE]): string {
  if (stubDir !== undefined) return stubDir;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sheetlog-stub-crates-'));
  for (const crate of crates) {
    fs.mkdirSync(path.join(dir, crate.dir));
    fs.writeFileSync(
      path.join(dir, crate.dir, 'Cargo.toml'),
      `[package]\nname = "${crate.binaryName}"\nversion = "0.0.0"\nedition = "2024"\n`,
    );
  }
  process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
  stubDir = dir;
  return dir;
}
