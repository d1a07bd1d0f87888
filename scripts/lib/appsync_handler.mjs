// Runs a channel namespace's handler code from the template (APPSYNC_JS) the way AppSync Events
// runs it, for the local Event API stand-in (functions/local/src/local_appsync.rs): the code
// exactly as the template holds it, with `@aws-appsync/utils` stood in for by the two calls it
// makes (`util.unauthorized()`, and `ddb.get`, which only describes a GetItem; the caller performs
// it on the data source's table and hands the item to the response function).
//
//   node scripts/lib/appsync_handler.mjs HANDLER_CODE_FILE
//
// Reads one JSON request a line on stdin, {"phase": "request" | "response" | "publish", "ctx": {...}},
// and answers one JSON line each: {"kind": "function" | "resolver" | "none", "unauthorized": bool,
// "value": <what the phase returned>} or {"error": "..."}. `request` and `response` run the
// onSubscribe handler (`kind` is its shape); `publish` runs onPublish on `ctx.events` (a list of
// {id, payload}) and answers the events to broadcast: what the handler returns, or the events
// unchanged when the code has no onPublish (AppSync's default).
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';

class Unauthorized extends Error {}
const util = {
  unauthorized() {
    throw new Unauthorized('Unauthorized');
  },
  error(message) {
    throw new Error(String(message));
  },
};
const ddb = { get: (request) => ({ operation: 'GetItem', ...request }) };

const code = readFileSync(process.argv[2], 'utf8');
const body = `${code
  .replace(/^import .*$/gm, '')
  .replace(/^export (const|function|let) /gm, '$1 ')}
return {
  onSubscribe: typeof onSubscribe === 'undefined' ? undefined : onSubscribe,
  onPublish: typeof onPublish === 'undefined' ? undefined : onPublish,
};`;
const handlers = new Function('util', 'ddb', body)(util, ddb);
const handler = handlers.onSubscribe;
const onPublish = handlers.onPublish;
const kind = typeof handler === 'function' ? 'function' : handler ? 'resolver' : 'none';

for await (const line of createInterface({ input: process.stdin })) {
  let answer;
  try {
    const { phase, ctx } = JSON.parse(line);
    let value = null;
    if (phase === 'publish') value = typeof onPublish === 'function' ? (onPublish(ctx) ?? []) : ctx.events;
    else if (kind === 'function' && phase === 'request') value = handler(ctx) ?? null;
    else if (kind === 'resolver') value = (phase === 'request' ? handler.request(ctx) : handler.response(ctx)) ?? null;
    answer = { kind, unauthorized: false, value };
  } catch (e) {
    answer = e instanceof Unauthorized ? { kind, unauthorized: true, value: null } : { error: String(e?.message ?? e) };
  }
  process.stdout.write(`${JSON.stringify(answer)}\n`);
}
