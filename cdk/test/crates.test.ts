/**
 * The contract with the Rust workspace: each function crate the stack deploys exists at
 * functions/<dir>/Cargo.toml, is a workspace member, and builds a binary named as the stack says
 * (cargo-lambda is invoked with `--bin <binaryName>`). The other tests synthesize against stub
 * crates, so this is the test that notices a renamed or missing crate before `cdk synth` does.
 */
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import { FUNCTIONS_DIR, REPO_ROOT, STREAM_FILTER_PATH } from '../lib/paths';
import { CRATES } from '../lib/sheetlog-stack';

/** The `name` of a TOML table such as [package] or [[bin]] (enough TOML for a Cargo manifest). */
function namesIn(manifest: string, header: RegExp): string[] {
  const names: string[] = [];
  let inTable = false;
  for (const line of manifest.split('\n')) {
    const trimmed = line.trim();
    if (trimmed.startsWith('[')) inTable = header.test(trimmed);
    const m = inTable ? /^name\s*=\s*"([^"]+)"/.exec(trimmed) : null;
    if (m) names.push(m[1]);
  }
  return names;
}

describe('function crates', () => {
  for (const crate of Object.values(CRATES)) {
    const manifestPath = path.join(FUNCTIONS_DIR, crate.dir, 'Cargo.toml');
    const present = fs.existsSync(manifestPath);
    test(`functions/${crate.dir} builds the binary ${crate.binaryName}`, {
      skip: present ? false : `functions/${crate.dir}/Cargo.toml is not in this tree yet`,
    }, () => {
      const manifest = fs.readFileSync(manifestPath, 'utf8');
      const bins = namesIn(manifest, /^\[\[bin\]\]$/);
      const [pkg] = namesIn(manifest, /^\[package\]$/);
      const binaries = bins.length > 0 ? bins : [pkg];
      assert.ok(
        binaries.includes(crate.binaryName),
        `${manifestPath} builds ${binaries.join(', ')}, not ${crate.binaryName}`,
      );
      assert.equal(pkg, crate.binaryName, 'package name = binary name (STYLE.md)');
      const workspace = fs.readFileSync(path.join(REPO_ROOT, 'Cargo.toml'), 'utf8');
      assert.match(workspace, /members\s*=\s*\[[^\]]*"functions\/\*"/, 'functions/* are workspace members');
    });
  }

  test('the stream filter the stack reads is in the tree', () => {
    assert.ok(fs.existsSync(STREAM_FILTER_PATH), STREAM_FILTER_PATH);
  });
});
