// Builds the web client into web/dist: the ES module bundle (esbuild) with the formula engine's
// glue split into a chunk of its own (`chunk-<hash>.js`, imported only when a sheet has a
// formula), the engine's WebAssembly (`ironcalc.wasm`, from @ironcalc/wasm, fetched with it), the
// stylesheet and the page. The API embeds web/dist at compile time (functions/api/src/web.rs), so
// this runs before cargo builds the API: ./scripts/dev, ./scripts/test and the CDK app
// (cdk/lib/web.ts) call it.
//
//   node web/build.mjs
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { constants, gzipSync } from 'node:zlib';
import * as esbuild from 'esbuild';

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, 'dist');

// Writes a file only when its content differs, so an unchanged client leaves web/dist's mtimes
// alone and cargo does not rebuild the API crate (its build script watches web/dist).
function writeIfChanged(path, content) {
  const bytes = Buffer.from(content);
  if (existsSync(path) && readFileSync(path).equals(bytes)) return;
  writeFileSync(path, bytes);
}

export async function build() {
  mkdirSync(out, { recursive: true });
  const result = await esbuild.build({
    entryPoints: { app: join(here, 'src/main.ts') },
    bundle: true,
    format: 'esm',
    // Dynamic imports become chunks of their own: the formula engine loads only when needed.
    splitting: true,
    chunkNames: 'chunk-[hash]',
    target: 'es2022',
    minify: true,
    sourcemap: false,
    outdir: out,
    write: false,
    logLevel: 'warning',
    // amazon-cognito-identity-js's `buffer` polyfill reads Node's `global`, which a page lacks.
    define: { global: 'globalThis' },
    metafile: true,
  });
  const files = new Map(result.outputFiles.map((f) => [basename(f.path), f.contents]));
  const js = files.get('app.js');
  if (!js) throw new Error('esbuild wrote no app.js');
  const chunks = [...files.keys()].filter((n) => n !== 'app.js');
  const wasm = readFileSync(createRequire(import.meta.url).resolve('@ironcalc/wasm/wasm_bg.wasm'));
  const css = readFileSync(join(here, 'styles.css'), 'utf8');
  const hash = createHash('sha256').update(js).update(css);
  for (const name of chunks) hash.update(name);
  const version = hash.digest('hex').slice(0, 12);
  // Each script, the stylesheet and the engine also gzipped (`<name>.gz`), served to browsers that
  // take gzip (functions/api/src/web.rs): the engine's 1.9 MB go out as about 0.7 MB.
  const emit = (name, bytes) => {
    writeIfChanged(join(out, name), bytes);
    writeIfChanged(join(out, `${name}.gz`), gzipSync(bytes, { level: constants.Z_BEST_COMPRESSION }));
  };
  for (const [name, bytes] of files) emit(name, bytes);
  emit('ironcalc.wasm', wasm);
  emit('app.css', css);
  // The chunks app.js imports at once (what esbuild shares between it and the engine's glue) are
  // fetched with it, not after it is parsed.
  const meta = Object.entries(result.metafile.outputs).find(([path]) => basename(path) === 'app.js')?.[1];
  const preloaded = (meta?.imports ?? []).filter((i) => i.kind === 'import-statement').map((i) => basename(i.path));
  const preload = preloaded.map((name) => `<link rel="modulepreload" href="/app/${name}">\n`).join('');
  writeIfChanged(
    join(out, 'index.html'),
    readFileSync(join(here, 'index.html'), 'utf8')
      .replaceAll('__VERSION__', version)
      .replace('</head>', `${preload}</head>`),
  );
  // Chunks of earlier builds: their names change with their contents.
  for (const name of readdirSync(out))
    if (/^chunk-.*\.js(\.gz)?$/.test(name) && !files.has(name.replace(/\.gz$/, ''))) rmSync(join(out, name));
  const size = (names) => names.reduce((n, name) => n + (files.get(name)?.length ?? 0), 0);
  const shared = new Set(preloaded);
  return {
    version,
    // What every page loads: app.js and the chunks it imports at once.
    bytes: js.length + size([...shared]),
    // What a sheet with a formula loads too.
    chunkBytes: size(chunks.filter((n) => !shared.has(n))),
    wasmBytes: wasm.length,
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { version, bytes, chunkBytes, wasmBytes } = await build();
  const kb = (n) => `${Math.round(n / 1024)} KB`;
  console.log(
    `web/dist built (${version}, ${kb(bytes)}; for a sheet with formulas, the engine too: ${kb(chunkBytes)} of script, ${kb(wasmBytes)} of WebAssembly)`,
  );
}
