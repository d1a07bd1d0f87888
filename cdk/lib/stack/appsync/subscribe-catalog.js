/**
 * The poke namespace's handlers under `cognito` authorization (AppSync JavaScript, APPSYNC_JS;
 * installed by cdk/lib/stack/pokes.ts through handlers.ts). AppSync has verified the user pool
 * token; onSubscribe reads the person's membership item of the sheet from the catalog (a GetItem
 * through the namespace's DynamoDB data source) and admits any member, whatever the role (every
 * role may read, and pokes only say "pull"). Not a member, no such sheet, or a channel that is not
 * `/sheets/<logId>`: unauthorized. The answer is not cached, so a removed member cannot subscribe
 * again; a subscription already open stays open until its connection ends (docs/sync.md, "Pokes":
 * a poke carries no data, pulls are checked by the API). cdk/test/handlers.test.ts runs this file,
 * cdk/test/cognito.test.ts the synthesized code.
 *
 * Set at synth: each line ending in `// set at synth` is replaced, whole, by handlers.ts with the
 * stack's value as JSON (the membership item's key prefixes `CATALOG_MEMBER_KEY` and the roles
 * `CATALOG_ROLES`, from cdk/lib/stack/names.ts); synth fails if such a line is missing or unknown.
 * The values written here are those of names.ts, for the tests that run this file as it is. The
 * file is deployed as it stands otherwise, comments included.
 *
 * APPSYNC_JS has no `try`, `throw`, `while` or classic `for`, and `util.unauthorized()` ends the
 * handler; the code uses none of those statements. Imports stay on one line each: the local runner
 * (scripts/lib/appsync_handler.mjs) drops `import` lines to run the code under Node.
 */
import { util } from '@aws-appsync/utils';
import * as ddb from '@aws-appsync/utils/dynamodb';

const MEMBER_PK_PREFIX = 'LOG#'; // set at synth
const MEMBER_SK_PREFIX = 'MEMBER#'; // set at synth
const MEMBER_ROLES = ['owner', 'editor', 'viewer']; // set at synth

export const onSubscribe = {
  request(ctx) {
    const segments = ctx.info.channel.segments;
    const log = segments.length === 2 ? segments[1].toLowerCase() : '';
    const sub = ctx.identity?.sub || '';
    if (log === '' || sub === '') {
      util.unauthorized();
    }
    return ddb.get({
      key: { pk: MEMBER_PK_PREFIX + log, sk: MEMBER_SK_PREFIX + sub },
      consistentRead: true,
    });
  },
  response(ctx) {
    if (ctx.error || !ctx.result || !MEMBER_ROLES.includes(ctx.result.role)) {
      util.unauthorized();
    }
  },
};

export function onPublish(ctx) {
  return ctx.events;
}
