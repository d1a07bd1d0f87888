/**
 * The poke namespace's handlers (AppSync JavaScript, APPSYNC_JS) as the stack installs them: each
 * is a real module in `cdk/lib/stack/appsync/` (`subscribe-jwt.js` for JWT authorization, the
 * token's access claim; `subscribe-catalog.js` for cognito authorization, a membership item of the
 * catalog), read from there at synth with the stack's values put into its lines marked
 * `// set at synth`. `cdk/lib/stack/pokes.ts` installs the code; `cdk/test/handlers.test.ts` runs
 * the modules themselves, `stack.test.ts` and `cognito.test.ts` the code in the template.
 */

import * as fs from 'node:fs';
import * as path from 'node:path';
import { CATALOG_MEMBER_KEY, CATALOG_ROLES } from './names';

/** Where the handler modules live, beside this file (the CDK app runs from source, under tsx). */
export const HANDLERS_DIR = path.join(__dirname, 'appsync');

/** A value set at synth: `const NAME = <literal>; // set at synth`, one line, LF-ended. */
const SYNTH_LINE = /^const ([A-Z][A-Z0-9_]*) = .*; \/\/ set at synth$/gm;

/**
 * The code of the handler module `file` (in `HANDLERS_DIR`) with the stack's `values`: the whole
 * line of each constant marked `// set at synth` is replaced by `const NAME = <JSON value>;` (with
 * its marker), so no value is ever spliced into a string or a regular expression, and the rest of
 * the file is deployed byte for byte. Throws if the file's marked constants are not exactly the
 * names of `values`, each once: a renamed or lost marker fails the synth, never the deployed code.
 */
export function handlerCode(file: string, values: Readonly<Record<string, unknown>>): string {
  return withSynthValues(fs.readFileSync(path.join(HANDLERS_DIR, file), 'utf8'), file, values);
}

/** `handlerCode` on a module's text (`file` names it in the error). */
export function withSynthValues(source: string, file: string, values: Readonly<Record<string, unknown>>): string {
  const marked = [...source.matchAll(SYNTH_LINE)].map((m) => m[1]);
  const given = Object.keys(values);
  const same =
    marked.length === new Set(marked).size &&
    marked.length === given.length &&
    given.every((name) => marked.includes(name) && JSON.stringify(values[name]) !== undefined);
  if (!same) {
    throw new Error(
      `${file}: the stack sets ${given.join(', ') || 'nothing'} at synth, the file marks ` +
        `${marked.join(', ') || 'nothing'} (each once, a line "const NAME = …; // set at synth")`,
    );
  }
  return source.replace(
    SYNTH_LINE,
    (_line, name: string) => `const ${name} = ${JSON.stringify(values[name])}; // set at synth`,
  );
}

/**
 * The namespace's handlers under JWT authorization (`appsync/subscribe-jwt.js`): onSubscribe admits
 * a subscriber to `/sheets/<logId>` only if the token's `accessClaim` grants at least read on it.
 */
export function onSubscribeCode(accessClaim: string): string {
  return handlerCode('subscribe-jwt.js', { ACCESS_CLAIM: accessClaim });
}

/**
 * The namespace's handlers under `cognito` authorization (`appsync/subscribe-catalog.js`):
 * onSubscribe reads the person's membership item of the sheet from the catalog and admits any member.
 */
export function onSubscribeCatalogCode(): string {
  return handlerCode('subscribe-catalog.js', {
    MEMBER_PK_PREFIX: CATALOG_MEMBER_KEY.pkPrefix,
    MEMBER_SK_PREFIX: CATALOG_MEMBER_KEY.skPrefix,
    MEMBER_ROLES: CATALOG_ROLES,
  });
}
