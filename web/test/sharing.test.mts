/**
 * Sign-in, the sheet list and sharing in real Chromium against a local stack started with
 * `./scripts/dev --auth cognito` (issue 31): alice signs in, creates "Budget" and shares it with
 * bob as a viewer; bob signs in in a second browser context, sees "Budget", cannot edit it (the
 * page is read-only, pushes nothing, and a push forged with his token is refused with 403);
 * alice makes bob an editor and bob's edit reaches her page. Also: a wrong password, an invited
 * user's first sign-in (a new password), rename, and sign-out. Run by `scripts/test-web`.
 *
 * The test owns its users' passwords: it sets them with the emulator's Cognito admin API (as
 * `aws cognito-idp admin-set-user-password` would), whatever `./scripts/dev` printed.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import { CognitoClient, type SignInResult } from '../src/cognito.ts';
import { edit, Pages, shareAs, shot, WAIT, waitCell } from './cognito-pages.mts';

const BASE = process.env.SHEETLOG_API_URL ?? '';
if (!BASE) throw new Error('SHEETLOG_API_URL is not set: run scripts/test-web');
const ALICE = 'alice@example.com';
const BOB = 'bob@example.com';
const PASSWORD: Record<string, string> = { [ALICE]: 'Alice-web-test-1', [BOB]: 'Bob-web-test-1' };

interface Config {
  auth: string;
  cognito: { region: string; userPoolId: string; clientId: string; endpoint: string | null };
}
let config: Config;

/** A call to the user pool's JSON API; admin calls carry an unsigned SigV4-shaped header naming the region. */
async function cognito(action: string, body: Record<string, unknown>, admin = false): Promise<Record<string, unknown>> {
  const c = config.cognito;
  const headers: Record<string, string> = {
    'content-type': 'application/x-amz-json-1.1',
    'x-amz-target': `AWSCognitoIdentityProviderService.${action}`,
  };
  if (admin)
    headers.authorization = `AWS4-HMAC-SHA256 Credential=local/20260101/${c.region}/cognito-idp/aws4_request, SignedHeaders=host, Signature=0`;
  const r = await fetch(c.endpoint ?? `https://cognito-idp.${c.region}.amazonaws.com/`, {
    method: 'POST',
    headers,
    body: JSON.stringify(body),
  });
  const text = await r.text();
  if (!r.ok) throw new Error(`${action}: ${r.status} ${text}`);
  return text ? (JSON.parse(text) as Record<string, unknown>) : {};
}

async function setPassword(email: string, password: string): Promise<void> {
  await cognito(
    'AdminSetUserPassword',
    { UserPoolId: config.cognito.userPoolId, Username: email, Password: password, Permanent: true },
    true,
  );
}

/** Signs `email` in with SRP outside the browser (the page's own client, run by Node). */
async function srpSignIn(email: string, password: string): Promise<SignInResult> {
  const c = config.cognito;
  return new CognitoClient({ ...c, endpoint: c.endpoint ?? `https://cognito-idp.${c.region}.amazonaws.com/` }).signIn(
    email,
    password,
  );
}

/** An access token for `email`, signed in outside the page. */
async function accessToken(email: string): Promise<string> {
  const r = await srpSignIn(email, PASSWORD[email]);
  assert.equal(r.kind, 'signed-in');
  return r.kind === 'signed-in' ? r.tokens.accessToken : '';
}

async function api(token: string, method: string, path: string, body?: unknown): Promise<Response> {
  return fetch(`${BASE}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
}

const pages = new Pages(BASE);
// An open sheet hears of a role change from a poke on its channel; its poll (30 s by default) is
// set to ten minutes here, so the tests show the poke is what brings the change.
const ROLE_POLL = { 'sheetlog.rolePollMs': '600000' };

function newPage(): Promise<Page> {
  return pages.newPage(ROLE_POLL);
}

/** Opens the page and signs in through its form, as a person does. */
function signIn(email: string, password = PASSWORD[email]): Promise<Page> {
  return pages.signIn(email, password, ROLE_POLL);
}

async function cells(token: string, logId: string, range: string): Promise<unknown[][]> {
  const r = await api(token, 'GET', `/logs/${logId}/cells?range=${range}`);
  assert.equal(r.status, 200, await r.clone().text());
  return ((await r.json()) as { values: unknown[][] }).values;
}

describe('sign-in, the sheet list and sharing (cognito mode)', () => {
  before(async () => {
    const r = await fetch(`${BASE}/config.json`);
    assert.equal(r.status, 200, 'GET /config.json');
    config = (await r.json()) as Config;
    assert.equal(config.auth, 'cognito', 'this test needs a stack started with ./scripts/dev --auth cognito');
    for (const [email, pw] of Object.entries(PASSWORD)) await setPassword(email, pw);
    await pages.launch();
  });
  after(async () => {
    await pages.close();
  });

  test('a wrong password is refused in words; the password itself is never sent', async () => {
    const page = await newPage();
    const sent: string[] = [];
    page.on('request', (r) => {
      if (r.method() === 'POST' && r.headers()['x-amz-target']) sent.push(r.postData() ?? '');
    });
    await page.goto(`${BASE}/sheets/${randomUUID()}`);
    // One character off: SRP refuses it as the emulator checks the proof (scripts/lib/moto_server.py).
    const wrong = `${PASSWORD[ALICE].slice(0, -1)}2`;
    await page.fill('input[aria-label="email"]', ALICE);
    await page.fill('input[aria-label="password"]', wrong);
    await page.click('form.sign-in button[type="submit"]');
    await page.waitForFunction(() => document.querySelector('.form-error')?.textContent !== '', undefined, WAIT);
    assert.equal(await page.locator('.form-error').innerText(), 'Wrong email or password.');
    assert.equal(await page.locator('table.sheets').count(), 0);
    // No token kept, and the page answered a PASSWORD_VERIFIER challenge with a proof, not the password.
    const kept = await page.evaluate((key) => localStorage.getItem(key), `sheetlog.cognito.${config.cognito.clientId}`);
    assert.equal(kept, null);
    assert.ok(
      sent.some((b) => b.includes('"USER_SRP_AUTH"')),
      sent.join('\n'),
    );
    assert.ok(
      sent.some((b) => b.includes('"PASSWORD_VERIFIER"')),
      sent.join('\n'),
    );
    assert.ok(!sent.some((b) => b.includes(wrong) || b.includes('"PASSWORD"')), sent.join('\n'));
    await shot(page, 'sign-in-refused');
  });

  test('alice shares "Budget" with bob as viewer, then editor; bob’s edit reaches her', async () => {
    const alice = await signIn(ALICE);
    await shot(alice, 'cognito-list-empty');
    // A new sheet with a name: the page opens it.
    await alice.fill('input[aria-label="new sheet name"]', 'Budget');
    await alice.click('button.new-sheet');
    await alice.waitForURL(/\/sheets\/[0-9a-f-]{36}$/, WAIT);
    const logId = alice.url().split('/').pop() ?? '';
    await alice.waitForSelector('.grid[data-synced-seq]', WAIT);
    // The page names the sheet as she typed it, not by its id (a walkthrough found `sheet
    // a868ee60` in the header and the browser tab).
    assert.equal(await alice.locator('.sheet-name').innerText(), 'Budget');
    assert.equal(await alice.title(), 'Budget · sheetlog');
    await edit(alice, 'A1', 'rent');
    await edit(alice, 'B1', '1200');
    await alice.waitForSelector('.grid[data-pending="0"]', WAIT);
    // Her list has it, with its name, her role and a last change.
    await alice.goto(`${BASE}/`);
    const aliceRow = alice.locator(`table.sheets tr[data-log-id="${logId}"]`);
    await aliceRow.waitFor(WAIT);
    assert.equal(await aliceRow.getAttribute('data-name'), 'Budget');
    assert.equal(await aliceRow.getAttribute('data-role'), 'owner');
    await aliceRow.locator('a.name').click();
    await alice.waitForSelector('.grid[data-synced-seq]', WAIT);
    assert.equal(await alice.locator('.sheet-name').innerText(), 'Budget');
    // Opened by its address with no list seen in this tab, it is still named: the page reads
    // the name from the sheet's members answer.
    await alice.evaluate(() => sessionStorage.clear());
    await alice.goto(`${BASE}/sheets/${logId}`);
    await alice.waitForSelector('.grid[data-synced-seq]', WAIT);
    assert.equal(await alice.locator('.sheet-name').innerText(), 'Budget');
    assert.equal(await alice.title(), 'Budget · sheetlog');
    // Signed in on the sheet's page too: who she is, and Sign out.
    assert.equal(await alice.locator('header .account .who').innerText(), ALICE);
    assert.equal(await alice.locator('header button.sign-out').count(), 1);
    // A new person is offered the least role first.
    await alice.click('header button.share');
    await alice.waitForSelector('dialog.share[data-loaded]', WAIT);
    assert.equal(await alice.inputValue('dialog.share select[aria-label="new member role"]'), 'viewer');
    // The only owner may neither leave nor step down: neither is offered (the API refuses both).
    const sole = alice.locator('dialog.share li', { hasText: '(you)' });
    assert.equal(await sole.locator('button.remove').count(), 0);
    assert.equal(await sole.locator('select').count(), 0);
    assert.equal(await sole.locator('.role').innerText(), 'owner');
    await alice.click('dialog.share button.close');
    await shareAs(alice, BOB, 'viewer');
    // Bob is invited: listed as such until he signs in and claims it (docs/api.md).
    const invited = alice.locator(`dialog.share li[data-email="${BOB}"]`);
    assert.equal(await invited.getAttribute('data-invited'), 'true');
    assert.match(await invited.innerText(), /invited/);
    // She is listed by her email, as the owner; bob may be removed.
    const herself = alice.locator('dialog.share li', { hasText: '(you)' });
    assert.equal(await herself.locator('.who').innerText(), ALICE);
    assert.equal(await herself.getAttribute('data-role'), 'owner');
    await shot(alice, 'share-dialog');
    await alice.click('dialog.share button.close');

    // Bob signs in elsewhere and finds it in his list, as viewer.
    const bob = await signIn(BOB);
    const bobRow = bob.locator(`table.sheets tr[data-log-id="${logId}"]`);
    await bobRow.waitFor(WAIT);
    assert.equal(await bobRow.getAttribute('data-name'), 'Budget');
    assert.equal(await bobRow.getAttribute('data-role'), 'viewer');
    assert.equal(await bobRow.locator('button.rename').count(), 0, 'a viewer cannot rename');
    await shot(bob, 'cognito-list-viewer');
    await bobRow.locator('a.name').click();
    await bob.waitForSelector('.grid[data-synced-seq]', WAIT);
    await waitCell(bob, 'A1', 'rent');
    // Read-only: he sees it, typing changes nothing, and the page pushes nothing.
    assert.equal(await bob.locator('.grid').getAttribute('data-read-only'), 'true');
    assert.match(await bob.locator('.badge.view-only').innerText(), /view only/i);
    assert.ok(await bob.locator('button:has-text("+ Row")').isDisabled());
    const pushes: string[] = [];
    bob.on('request', (r) => {
      if (r.url().includes('/replicache/push')) pushes.push(r.url());
    });
    await edit(bob, 'C1', 'sneaky');
    await bob.keyboard.press('Delete');
    assert.equal(await bob.locator('[data-ref="C1"]').innerText(), '');
    // Typing says why nothing happens, and the status claims no saved changes.
    await bob.waitForSelector('.message.warn:has-text("You can view this sheet but not edit it")', WAIT);
    assert.equal(await bob.locator('.message.warn:has-text("You can view this sheet")').count(), 1, 'said once');
    assert.equal(await bob.locator('.status').innerText(), 'Up to date (view only)');
    assert.equal(await bob.locator('.grid').getAttribute('data-pending'), '0');
    await shot(bob, 'viewer-read-only');
    // A push forged with his token is refused, and changes nothing.
    const bobToken = await accessToken(BOB);
    const forged = await api(bobToken, 'POST', `/logs/${logId}/replicache/push`, {
      pushVersion: 1,
      clientGroupID: `forged-${randomUUID()}`,
      profileID: 'p',
      schemaVersion: '',
      mutations: [
        {
          clientID: `forged-${randomUUID()}`,
          id: 1,
          name: 'set',
          timestamp: 1,
          args: { cells: [{ ref: 'A1', value: 'forged' }] },
        },
      ],
    });
    assert.equal(forged.status, 403, await forged.text());
    const append = await api(bobToken, 'POST', `/logs/${logId}/entries`, {
      type: 'set',
      body: { cells: [{ ref: 'A1', value: 'forged' }] },
    });
    assert.equal(append.status, 403, await append.text());
    assert.deepEqual(await cells(bobToken, logId, 'A1:C1'), [['rent', 1200, null]]);
    assert.deepEqual(pushes, [], 'the viewer’s page pushed nothing');

    // Alice makes him an editor; his open page notices (it reopens the sheet as an editor), he
    // edits, and she sees it.
    await shareAs(alice, BOB, 'editor');
    assert.equal(
      await alice.locator(`dialog.share li[data-email="${BOB}"]`).getAttribute('data-invited'),
      null,
      'bob claimed the invitation by opening his list: a member now',
    );
    await alice.click('dialog.share button.close');
    await bob.waitForSelector('.grid:not([data-read-only])[data-synced-seq]', WAIT);
    assert.equal(await bob.locator('.badge.view-only').count(), 0);
    await edit(bob, 'C1', 'from bob');
    await bob.waitForSelector('.grid[data-pending="0"]', WAIT);
    await waitCell(alice, 'C1', 'from bob');
    assert.deepEqual(await cells(await accessToken(ALICE), logId, 'A1:C1'), [['rent', 1200, 'from bob']]);
    await shot(alice, 'edit-from-bob');

    // As editor he renames it; alice's list shows the new name.
    await bob.goto(`${BASE}/`);
    await bobRow.waitFor(WAIT);
    await bobRow.locator('button.rename').click();
    await bobRow.locator('input[aria-label="sheet name"]').fill('Budget 2027');
    await bobRow.locator('input[aria-label="sheet name"]').press('Enter');
    await bob.waitForSelector(`tr[data-log-id="${logId}"][data-name="Budget 2027"]`, WAIT);
    await alice.goto(`${BASE}/`);
    await alice.waitForSelector(`tr[data-log-id="${logId}"][data-name="Budget 2027"]`, WAIT);

    // Bob leaves: the sheet is gone from his list and his token no longer reads it.
    const leave = bob.locator(`tr[data-log-id="${logId}"] button.leave`);
    await leave.click();
    await leave.click();
    await bob.waitForSelector(`tr[data-log-id="${logId}"]`, { state: 'detached', ...WAIT });
    await bob.reload();
    await bob.waitForSelector('table.sheets[data-loaded]', WAIT);
    assert.equal(await bob.locator(`tr[data-log-id="${logId}"]`).count(), 0);
  });

  test('an invited colleague chooses a password at the first sign-in', async () => {
    const email = `carol-${randomUUID().slice(0, 8)}@example.com`;
    await cognito(
      'AdminCreateUser',
      {
        UserPoolId: config.cognito.userPoolId,
        Username: email,
        TemporaryPassword: 'Temp-pass-123',
        MessageAction: 'SUPPRESS',
        UserAttributes: [
          { Name: 'email', Value: email },
          { Name: 'email_verified', Value: 'true' },
        ],
      },
      true,
    );
    const page = await newPage();
    await page.goto(`${BASE}/`);
    await page.fill('input[aria-label="email"]', email);
    await page.fill('input[aria-label="password"]', 'Temp-pass-123');
    await page.click('form.sign-in button[type="submit"]');
    await page.waitForSelector('form.new-password', WAIT);
    await shot(page, 'new-password');
    await page.fill('input[aria-label="new password"]', 'Carol-own-pass-1');
    await page.fill('input[aria-label="repeat new password"]', 'Carol-own-pass-2');
    await page.click('form.new-password button[type="submit"]');
    assert.equal(await page.locator('form.new-password .form-error').innerText(), 'The two passwords differ.');
    await page.fill('input[aria-label="repeat new password"]', 'Carol-own-pass-1');
    await page.click('form.new-password button[type="submit"]');
    await page.waitForSelector('table.sheets[data-loaded]', WAIT);
    // Her own password signs her in from now on, and the temporary one no longer does.
    assert.equal((await srpSignIn(email, 'Carol-own-pass-1')).kind, 'signed-in');
    await assert.rejects(srpSignIn(email, 'Temp-pass-123'), /Wrong email or password/);
  });

  test('the list shows 50 sheets and pages on with More', async () => {
    const email = `dave-${randomUUID().slice(0, 8)}@example.com`;
    const password = 'Dave-web-test-1';
    await cognito(
      'AdminCreateUser',
      {
        UserPoolId: config.cognito.userPoolId,
        Username: email,
        MessageAction: 'SUPPRESS',
        UserAttributes: [{ Name: 'email', Value: email }],
      },
      true,
    );
    PASSWORD[email] = password;
    await setPassword(email, password);
    const token = await accessToken(email);
    const names = Array.from({ length: 51 }, (_, i) => `Sheet ${String(i + 1).padStart(2, '0')}`);
    for (const name of names) {
      const r = await api(token, 'POST', '/logs', { name });
      assert.equal(r.status, 201, await r.text());
    }
    const page = await signIn(email);
    const rows = page.locator('table.sheets tbody tr[data-log-id]');
    assert.equal(await rows.count(), 50);
    assert.ok(await page.locator('button.more').isVisible());
    await page.click('button.more');
    await page.waitForFunction(
      () => document.querySelectorAll('table.sheets tr[data-log-id]').length === 51,
      undefined,
      WAIT,
    );
    const shown = await rows.evaluateAll((trs) => trs.map((tr) => (tr as HTMLElement).dataset.name ?? ''));
    assert.deepEqual([...shown].sort(), names);
    assert.ok(await page.locator('button.more').isHidden());
  });

  test('a reload stays signed in; sign-out ends it', async () => {
    const page = await signIn(ALICE);
    await page.reload();
    await page.waitForSelector('table.sheets[data-loaded]', WAIT);
    assert.equal(await page.locator('.account .who').innerText(), ALICE);
    // The access token is not kept in storage, only the refresh token.
    const stored = await page.evaluate(() => JSON.stringify(localStorage));
    assert.doesNotMatch(stored, /"accessToken"/);
    assert.match(stored, /refreshToken/);
    await page.click('button.sign-out');
    await page.waitForSelector('form.sign-in', WAIT);
    await page.reload();
    await page.waitForSelector('form.sign-in', WAIT);
    assert.doesNotMatch(await page.evaluate(() => JSON.stringify(localStorage)), /refreshToken/);
  });
});
