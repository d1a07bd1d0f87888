// Builds the web client into web/dist: one ES module bundle (esbuild), the stylesheet and the
// page. The API embeds web/dist at compile time (functions/api/src/web.rs), so this runs before
// cargo builds the API: ./scripts/dev, ./scripts/test and the CDK app (cdk/lib/web.ts) call it.
//
//   node web/build.mjs [--watch]
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, 'dist');

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
    logLevel: 'warning',
    metafile: true,
  });
  const css = readFileSync(join(here, 'styles.css'), 'utf8');
  writeFileSync(join(out, 'app.css'), css);
  const js = readFileSync(join(out, 'app.js'));
  const version = createHash('sha256').update(js).update(css).digest('hex').slice(0, 12);
  writeFileSync(
    join(out, 'index.html'),
    readFileSync(join(here, 'index.html'), 'utf8').replaceAll('__VERSION__', version),
  );
  const bytes = Object.values(result.metafile.outputs).reduce((n, o) => n + o.bytes, 0);
  return { version, bytes };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { version, bytes } = await build();
  console.log(`web/dist built (${version}, ${Math.round(bytes / 1024)} KB)`);
}
