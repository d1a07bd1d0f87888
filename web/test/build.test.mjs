// web/build.mjs leaves web/dist alone when nothing changed: the API crate's build script watches
// web/dist, so a rewrite with the same bytes would make cargo rebuild the API and everything that
// depends on it on every ./scripts/test and ./scripts/dev.
import assert from 'node:assert/strict';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { build } from '../build.mjs';

const dist = fileURLToPath(new URL('../dist', import.meta.url));
const mtimes = () => Object.fromEntries(readdirSync(dist).map((f) => [f, statSync(join(dist, f)).mtimeMs]));

test('a second build of an unchanged client writes nothing', async () => {
  const first = await build();
  const before = mtimes();
  // Past the file system's timestamp granularity, so a rewrite would show.
  await new Promise((r) => setTimeout(r, 50));
  const second = await build();
  assert.equal(second.version, first.version);
  assert.deepEqual(mtimes(), before);
  // The formula engine ships beside the bundle: its glue as a chunk, and its WebAssembly.
  assert.ok(Object.keys(before).includes('ironcalc.wasm'), Object.keys(before).join(', '));
  assert.ok(first.chunkBytes > 0 && first.wasmBytes > 1_000_000, JSON.stringify(first));
});
