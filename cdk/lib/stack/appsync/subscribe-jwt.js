/**
 * The poke namespace's handlers under JWT authorization (AppSync JavaScript, APPSYNC_JS; installed
 * by cdk/lib/stack/pokes.ts through handlers.ts). onSubscribe admits a subscriber to
 * `/sheets/<logId>` only if its token's access claim grants at least read on that sheet, as the
 * HTTP API requires to pull it. It reads grants by the API's grammar (functions/api/src/access.rs,
 * docs/api.md "Access to logs"): a JSON array or a space- or comma-separated string (`[a b]` as
 * API Gateway writes an array, quotes around a grant); a grant's level is what follows its last
 * `:` (`read` or `write`, none meaning write) and the rest is `*` or the sheet's id in its
 * hyphenated form, any case. `*:x:read`, `:read`, `<logId>:READ` grant nothing; a channel whose
 * second segment is not a hyphenated UUID is no sheet's. cdk/test/fixtures/grants.json is the one
 * table of cases this handler (cdk/test/handlers.test.ts runs this file, cdk/test/stack.test.ts
 * the synthesized code) and the API's parser must both pass.
 *
 * Set at synth: each line ending in `// set at synth` is replaced, whole, by handlers.ts with the
 * stack's value as JSON (the name of the access claim, `jwtAccessClaim`); synth fails if such a
 * line is missing or unknown. The value written here is the default, for the tests that run this
 * file as it is. The file is deployed as it stands otherwise, comments included.
 *
 * APPSYNC_JS has no `try`, `throw`, `while` or classic `for`, and `util.unauthorized()` ends the
 * handler; the code uses none of those statements. Imports stay on one line each: the local runner
 * (scripts/lib/appsync_handler.mjs) drops `import` lines to run the code under Node.
 */
import { util } from '@aws-appsync/utils';

const ACCESS_CLAIM = 'sheetlog_logs'; // set at synth

export function onSubscribe(ctx) {
  const segments = ctx.info.channel.segments;
  const log = segments.length === 2 ? segments[1].toLowerCase() : '';
  if (log.match(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/) === null) {
    util.unauthorized();
  }
  const claims = ctx.identity?.claims || {};
  const raw = claims[ACCESS_CLAIM];
  let text = (Array.isArray(raw) ? `[${raw.join(' ')}]` : typeof raw === 'string' ? raw : '').trim();
  if (text.startsWith('[') && text.endsWith(']')) {
    text = text.slice(1, text.length - 1);
  }
  const items = text
    .split(/[\s,]+/)
    .map((g) => g.replace(/^"+|"+$/g, ''))
    .filter((g) => g !== '');
  const granted = items.some((g) => {
    const at = g.lastIndexOf(':');
    const target = (at < 0 ? g : g.slice(0, at)).toLowerCase();
    const level = at < 0 ? 'write' : g.slice(at + 1);
    return (level === 'read' || level === 'write') && (target === '*' || target === log);
  });
  if (!granted) {
    util.unauthorized();
  }
}

export function onPublish(ctx) {
  return ctx.events;
}
