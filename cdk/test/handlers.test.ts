/**
 * The poke namespace's handler modules (`cdk/lib/stack/appsync/*.js`) run as they are, with
 * stand-ins for `@aws-appsync/utils` (cdk/test/appsync/), and `cdk/lib/stack/handlers.ts`, which
 * puts the stack's values into them at synth. The code in the template is run by stack.test.ts
 * (JWT) and cognito.test.ts (catalog), under the local stack's runner.
 */
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import {
  HANDLERS_DIR,
  handlerCode,
  onSubscribeCatalogCode,
  onSubscribeCode,
  withSynthValues,
} from '../lib/stack/handlers';
import { CATALOG_MEMBER_KEY, CATALOG_ROLES } from '../lib/stack/names';
import { admits, channelCtx, grantCases, importHandler } from './appsync/run';
import type { Json } from './support';

describe('subscribe-jwt.js (JWT authorization)', () => {
  /** Whether the module admits a subscriber whose access claim (`sheetlog_logs`, the default) is `claim`. */
  const allows = async (claim: unknown, channel: string): Promise<boolean> => {
    const { onSubscribe } = await importHandler('subscribe-jwt.js');
    return admits(() => onSubscribe(channelCtx(channel, { claims: { sheetlog_logs: claim } })));
  };

  test('onSubscribe admits readers of the sheet and no one else', async () => {
    const x = '0b6f3c1e-4a53-4d8e-9a41-6c1d2f0e7a10';
    const y = '5d2a9e7b-1c84-4f3a-b6e0-93a7c2d1f845';
    const chX = `/sheets/${x}`;
    const chY = `/sheets/${y}`;
    const cases: [string, unknown, string, boolean][] = [
      ['a JSON array claim', [`${x}:read`, 'create'], chX, true],
      ['a JSON array claim, other sheet', [`${x}:read`, 'create'], chY, false],
      ['an array as a string (API Gateway form)', `["${x}:write","create"]`, chX, true],
      ['an array as a string, other sheet', `["${x}:write","create"]`, chY, false],
      ['a bracketed list', `[create ${x}]`, chX, true],
      ['a space-separated list', `create ${y}:read ${x}:write`, chX, true],
      ['a space-separated list, second grant', `create ${y}:read ${x}:write`, chY, true],
      ['a comma-separated list', `${y}:read, ${x}`, chX, true],
      ['a single grant', x, chX, true],
      ['a single grant, other sheet', x, chY, false],
      ['a wildcard', '*:read', chY, true],
      ['a bare wildcard', '*', chX, true],
      ['an unknown level', `${x}:admin`, chX, false],
      ['create only', 'create', chX, false],
      ['no claim', undefined, chX, false],
      ['a grant for the sheet, a deeper channel', x, `${chX}/more`, false],
    ];
    for (const [name, claim, channel, expected] of cases) {
      assert.equal(await allows(claim, channel), expected, `${name}: ${JSON.stringify(claim)} on ${channel}`);
    }
    const { onSubscribe } = await importHandler('subscribe-jwt.js');
    assert.equal(await admits(() => onSubscribe(channelCtx(chX, undefined))), false, 'no identity');
  });

  test('onSubscribe reads grants as the API does (the shared table of cases)', async () => {
    const wrong: string[] = [];
    for (const { label, claim, channel, admitted } of grantCases()) {
      const got = await allows(claim, channel);
      if (got !== admitted) wrong.push(`${label}: got ${got}`);
    }
    assert.deepEqual(wrong, []);
  });

  test('onPublish passes the events on as they are', async () => {
    const { onPublish } = await importHandler('subscribe-jwt.js');
    const events = [{ id: '1', payload: { seq: 7 } }];
    assert.deepEqual(onPublish({ events }), events);
  });
});

describe('subscribe-catalog.js (cognito authorization)', () => {
  const log = '0b6f3c1e-4a53-4d8e-9a41-6c1d2f0e7a10';
  const sub = '7c1e2d3f-0000-4000-8000-00000000000a';
  const ctxFor = (channel: string, who: string | undefined, more: Json = {}) =>
    channelCtx(channel, who === undefined ? {} : { sub: who, claims: { sub: who } }, more);

  test('onSubscribe asks for the person’s membership item of the sheet, strongly consistent', async () => {
    const { onSubscribe } = await importHandler('subscribe-catalog.js');
    assert.deepEqual(onSubscribe.request(ctxFor(`/sheets/${log.toUpperCase()}`, sub)), {
      operation: 'GetItem',
      key: { pk: `${CATALOG_MEMBER_KEY.pkPrefix}${log}`, sk: `${CATALOG_MEMBER_KEY.skPrefix}${sub}` },
      consistentRead: true,
    });
    assert.equal(await admits(() => onSubscribe.request(ctxFor('/sheets', sub))), false, 'the namespace itself');
    assert.equal(await admits(() => onSubscribe.request(ctxFor(`/sheets/${log}/more`, sub))), false, 'deeper');
    assert.equal(await admits(() => onSubscribe.request(ctxFor(`/sheets/${log}`, undefined))), false, 'no sub');
    assert.equal(await admits(() => onSubscribe.request(channelCtx(`/sheets/${log}`, undefined))), false, 'no one');
  });

  test('onSubscribe admits every member role and no one else', async () => {
    const { onSubscribe } = await importHandler('subscribe-catalog.js');
    const answer = (result: Json | null | undefined, error?: Json) =>
      admits(() => onSubscribe.response(ctxFor(`/sheets/${log}`, sub, { result, error })));
    for (const role of CATALOG_ROLES) assert.equal(await answer({ role }), true, role);
    assert.equal(await answer(null), false, 'no membership item');
    assert.equal(await answer(undefined), false, 'no result');
    assert.equal(await answer({}), false, 'an item without a role');
    assert.equal(await answer({ role: 'admin' }), false, 'an unknown role');
    assert.equal(await answer({ role: 'owner' }, { message: 'throttled' }), false, 'a failed read denies');
  });

  test('onPublish passes the events on as they are', async () => {
    const { onPublish } = await importHandler('subscribe-catalog.js');
    const events = [{ id: '1', payload: { seq: 7 } }];
    assert.deepEqual(onPublish({ events }), events);
  });
});

describe('handlers.ts: the modules with the stack’s values', () => {
  const file = (name: string) => fs.readFileSync(path.join(HANDLERS_DIR, name), 'utf8');
  const marked = /^const \w+ = .*; \/\/ set at synth$/gm;

  test('only the lines marked `// set at synth` change; the rest of each file is installed as it is', () => {
    const claim = 'https://id.example.com/logs';
    const jwt = onSubscribeCode(claim);
    assert.match(jwt, /^const ACCESS_CLAIM = "https:\/\/id\.example\.com\/logs"; \/\/ set at synth$/m);
    assert.equal(jwt.replace(marked, ''), file('subscribe-jwt.js').replace(marked, ''));
    const catalog = onSubscribeCatalogCode();
    for (const line of [
      `const MEMBER_PK_PREFIX = ${JSON.stringify(CATALOG_MEMBER_KEY.pkPrefix)}; // set at synth`,
      `const MEMBER_SK_PREFIX = ${JSON.stringify(CATALOG_MEMBER_KEY.skPrefix)}; // set at synth`,
      `const MEMBER_ROLES = ${JSON.stringify(CATALOG_ROLES)}; // set at synth`,
    ]) {
      assert.ok(catalog.split('\n').includes(line), line);
    }
    assert.equal(catalog.replace(marked, ''), file('subscribe-catalog.js').replace(marked, ''));
  });

  test('a value reaches the code as the value, whatever its characters', () => {
    // Quotes, a backslash, replacement patterns, a backtick, a line separator.
    const value = ['a"b\'c', '\\s', "$& $1 $' $$", '`', '\u2028'].join(' ');
    const code = withSynthValues("const A = 'x'; // set at synth\nconst B = 1; // set at synth\n", 'f.js', {
      A: value,
      B: ['r', 'w'],
    });
    assert.deepEqual(new Function(`${code}return [A, B];`)(), [value, ['r', 'w']]);
  });

  test('a lost, unknown or repeated marker fails the synth', () => {
    const line = "const A = 'x'; // set at synth\n";
    assert.throws(() => withSynthValues('const A = 1;\n', 'f.js', { A: 'v' }), /f\.js: the stack sets A at synth/);
    assert.throws(() => withSynthValues(line, 'f.js', {}), /the file marks A/);
    assert.throws(() => withSynthValues(line + line, 'f.js', { A: 'v' }), /the file marks A, A/);
    assert.throws(() => withSynthValues(line, 'f.js', { A: 'v', B: 'w' }), /sets A, B/);
    assert.throws(() => withSynthValues(line, 'f.js', { A: undefined }), /sets A/);
    assert.throws(() => handlerCode('no-such-handler.js', {}), /ENOENT/);
  });
});
