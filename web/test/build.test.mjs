// web/build.mjs leaves web/dist alone when nothing changed: the API crate's build script watches
// web/dist, so a rewrite with the same bytes would make cargo rebuild the API and everything that
// depends on it on every ./scripts/test and ./scripts/dev.
import assert from 'node:assert/strict';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { build } from '../build.mjs';

const dist = fileURLToPath(new URL('../dist', import.meta.url));
const files = ['app.js', 'app.css', 'index.html'];
const mtimes = () => files.map((f) => statSync(join(dist, f)).mtimeMs);

test('a second build of an unchanged client writes nothing', async () => {
  const first = await build();
  const before = mtimes();
  // Past the file system's timestamp granularity, so a rewrite would show.
  await new Promise((r) => setTimeout(r, 50));
  const second = await build();
  assert.equal(second.version, first.version);
  assert.deepEqual(mtimes(), before);
});
