/**
 * Two people on one sheet, end to end, in real Chromium against a cognito-mode stack: the browser
 * part of `scripts/integ --auth cognito` (a deployed sandbox stack: AWS's user pool, API Gateway,
 * the queued sync writer and AppSync Events), also run by `scripts/test-web` against
 * `./scripts/dev --auth cognito` so it cannot rot between sandbox runs. A signs in through the
 * page, creates a sheet, edits a cell and shares the sheet with B as an editor; B signs in in a
 * second browser context, finds the sheet in the list and opens it; then an edit by A reaches B's
 * page, and one by B reaches A's, by poke: both pages pull only every ten minutes otherwise, and
 * the edit must arrive within `SHEETLOG_WEB_POKE_MS` (10 s), well before even the page's default
 * 30-second fallback pull would bring it.
 *
 * It only signs in, uses the page and reads `/config.json`: no emulator admin calls, no sign-up.
 * The two accounts must exist with permanent passwords (scripts/integ creates them with
 * AdminCreateUser and AdminSetUserPassword; locally they are the demo users `./scripts/dev` makes):
 *   SHEETLOG_API_URL              the stack's URL (`ApiUrl`), no trailing slash
 *   SHEETLOG_WEB_USER_A, SHEETLOG_WEB_PASSWORD_A, SHEETLOG_WEB_USER_B, SHEETLOG_WEB_PASSWORD_B
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import { edit, Pages, shareAs, shot, WAIT, waitCell } from './cognito-pages.mts';

function env(name: string): string {
  const v = process.env[name] ?? '';
  if (!v) throw new Error(`${name} is not set: run scripts/integ --auth cognito or scripts/test-web`);
  return v;
}
const BASE = env('SHEETLOG_API_URL').replace(/\/+$/, '');
const A = { email: env('SHEETLOG_WEB_USER_A'), password: env('SHEETLOG_WEB_PASSWORD_A') };
const B = { email: env('SHEETLOG_WEB_USER_B'), password: env('SHEETLOG_WEB_PASSWORD_B') };
/** How long a poked edit may take to show on the other page. */
const POKE_MS = Number(process.env.SHEETLOG_WEB_POKE_MS) || 10_000;
/** The pages' fallback pull (sheet-sync.ts: 30 s by default, and only while the poke channel is down). */
const NO_POLL = { 'sheetlog.fallbackPullMs': '600000' };

const pages = new Pages(BASE);

/** Waits for `text` in `ref` on `page`, at most POKE_MS; returns how long it took. */
async function arrives(page: Page, ref: string, text: string): Promise<number> {
  const t0 = Date.now();
  await waitCell(page, ref, text, { timeout: POKE_MS });
  return Date.now() - t0;
}

describe('two people on one sheet, by poke (cognito mode)', () => {
  before(async () => {
    const r = await fetch(`${BASE}/config.json`);
    assert.equal(r.status, 200, 'GET /config.json');
    const config = (await r.json()) as { auth: string };
    assert.equal(config.auth, 'cognito', 'this test needs a stack with authMode=cognito');
    await pages.launch();
  });
  after(async () => {
    await pages.close();
  });

  test('A edits and shares a sheet with B; each sees the other’s edit by poke', async () => {
    const name = `integ ${randomUUID().slice(0, 8)}`;
    const a = await pages.signIn(A.email, A.password, NO_POLL);
    await a.fill('input[aria-label="new sheet name"]', name);
    await a.click('button.new-sheet');
    await a.waitForURL(/\/sheets\/[0-9a-f-]{36}$/, WAIT);
    const logId = a.url().split('/').pop() ?? '';
    await a.waitForSelector('.grid[data-synced-seq]', WAIT);
    await edit(a, 'A1', 'from A');
    await a.waitForSelector('.grid[data-pending="0"]', WAIT);
    await shareAs(a, B.email, 'editor');
    await a.click('dialog.share button.close');

    // B signs in elsewhere, finds the sheet in the list (claiming the invitation) and opens it.
    const b = await pages.signIn(B.email, B.password, NO_POLL);
    const row = b.locator(`table.sheets tr[data-log-id="${logId}"]`);
    await row.waitFor(WAIT);
    assert.equal(await row.getAttribute('data-name'), name);
    assert.equal(await row.getAttribute('data-role'), 'editor');
    await row.locator('a.name').click();
    await b.waitForSelector('.grid:not([data-read-only])[data-synced-seq]', WAIT);
    await waitCell(b, 'A1', 'from A');

    // Both pages are subscribed to the sheet's poke channel (for B: admitted as a member).
    await a.waitForSelector('.grid[data-link="live"]', WAIT);
    await b.waitForSelector('.grid[data-link="live"]', WAIT);

    await edit(a, 'A2', 'poked to B');
    const toB = await arrives(b, 'A2', 'poked to B');
    await edit(b, 'B2', 'poked to A');
    const toA = await arrives(a, 'B2', 'poked to A');
    console.log(`edit to page by poke: A→B ${toB} ms, B→A ${toA} ms (limit ${POKE_MS} ms)`);
    await b.waitForSelector('.grid[data-pending="0"]', WAIT);
    await shot(b, 'integ-poked');
  });
});
