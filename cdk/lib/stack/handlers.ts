/**
 * The poke namespace's onSubscribe handlers (AppSync JavaScript, APPSYNC_JS), generated as text:
 * one for JWT authorization (the token's access claim) and one for cognito authorization (a
 * membership item of the catalog). `cdk/lib/stack/pokes.ts` installs them; the tests run them.
 */

import { CATALOG_MEMBER_KEY, CATALOG_ROLES } from './names';

/**
 * The namespace's onSubscribe handler (APPSYNC_JS) under JWT authorization: a subscriber may join
 * `/sheets/<logId>` only if its token's access claim grants at least read on that sheet, as the
 * HTTP API requires to pull it. It reads grants by the API's grammar (functions/api/src/access.rs,
 * docs/api.md "Access to logs"): a JSON array or a space- or comma-separated string (`[a b]` as
 * API Gateway writes an array, quotes around a grant); a grant's level is what follows its last
 * `:` (`read` or `write`, none meaning write) and the rest is `*` or the sheet's id in its
 * hyphenated form, any case. `*:x:read`, `:read`, `<logId>:READ` grant nothing; a channel whose
 * second segment is not a hyphenated UUID is no sheet's. cdk/test/fixtures/grants.json is the one
 * table of cases this handler (cdk/test/stack.test.ts runs the synthesized code) and the API's
 * parser must both pass.
 * The code is a template literal: a regex backslash must be written `\\` here to reach the handler.
 * APPSYNC_JS has no `try`, `throw`, `while` or classic `for`; the code uses none.
 */
export function onSubscribeCode(accessClaim: string): string {
  return `import { util } from '@aws-appsync/utils';

export function onSubscribe(ctx) {
  const segments = ctx.info.channel.segments;
  const log = segments.length === 2 ? segments[1].toLowerCase() : '';
  if (log.match(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/) === null) {
    util.unauthorized();
  }
  const claims = (ctx.identity && ctx.identity.claims) || {};
  const raw = claims[${JSON.stringify(accessClaim)}];
  let text = (Array.isArray(raw) ? '[' + raw.join(' ') + ']' : typeof raw === 'string' ? raw : '').trim();
  if (text.startsWith('[') && text.endsWith(']')) {
    text = text.slice(1, text.length - 1);
  }
  const items = text
    .split(/[\\s,]+/)
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
`;
}

/**
 * The namespace's onSubscribe handler (APPSYNC_JS) under `cognito` authorization: AppSync has
 * verified the user pool token; the handler reads the person's membership item of the sheet from
 * the catalog (a GetItem through the namespace's DynamoDB data source) and admits any member,
 * whatever the role (every role may read, and pokes only say "pull"). Not a member, no such
 * sheet, or a channel that is not `/sheets/<logId>`: unauthorized. The answer is not cached, so a
 * removed member cannot subscribe again; a subscription already open stays open until its
 * connection ends (docs/sync.md, "Pokes": a poke carries no data, pulls are checked by the API).
 */
export function onSubscribeCatalogCode(): string {
  return `import { util } from '@aws-appsync/utils';
import * as ddb from '@aws-appsync/utils/dynamodb';

export const onSubscribe = {
  request(ctx) {
    const segments = ctx.info.channel.segments;
    const log = segments.length === 2 ? segments[1].toLowerCase() : '';
    const sub = (ctx.identity && ctx.identity.sub) || '';
    if (log === '' || sub === '') {
      util.unauthorized();
    }
    return ddb.get({
      key: { pk: ${JSON.stringify(CATALOG_MEMBER_KEY.pkPrefix)} + log, sk: ${JSON.stringify(CATALOG_MEMBER_KEY.skPrefix)} + sub },
      consistentRead: true,
    });
  },
  response(ctx) {
    const roles = ${JSON.stringify(CATALOG_ROLES)};
    if (ctx.error || !ctx.result || !roles.includes(ctx.result.role)) {
      util.unauthorized();
    }
  },
};

export function onPublish(ctx) {
  return ctx.events;
}
`;
}
