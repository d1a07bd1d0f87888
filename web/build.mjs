// Builds the web client into web/dist: one ES module bundle (esbuild), the stylesheet and the
// page. The API embeds web/dist at compile time (functions/api/src/web.rs), so this runs before
// cargo builds the API: ./scripts/dev, ./scripts/test and the CDK app (cdk/lib/web.ts) call it.
//
//   node web/build.mjs
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
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
    entryPoints: [join(here, 'src/main.ts')],
    bundle: true,
    format: 'esm',
    target: 'es2022',
    minify: true,
    sourcemap: false,
    outfile: join(out, 'app.js'),
    write: false,
    logLevel: 'warning',
    // amazon-cognito-identity-js's `buffer` polyfill reads Node's `global`, which a page lacks.
    define: { global: 'globalThis' },
  });
  const [bundle] = result.outputFiles;
  const js = bundle.contents;
  const css = readFileSync(join(here, 'styles.css'), 'utf8');
  const version = createHash('sha256').update(js).update(css).digest('hex').slice(0, 12);
  writeIfChanged(join(out, 'app.js'), js);
  writeIfChanged(join(out, 'app.css'), css);
  writeIfChanged(
    join(out, 'index.html'),
    readFileSync(join(here, 'index.html'), 'utf8').replaceAll('__VERSION__', version),
  );
  return { version, bytes: js.length };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { version, bytes } = await build();
  console.log(`web/dist built (${version}, ${Math.round(bytes / 1024)} KB)`);
}
