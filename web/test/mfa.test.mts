/**
 * Sign-in with an authenticator app, in Chromium against `./scripts/dev --auth cognito -c
 * cognitoMfa=required` (issue 42): the local user pool takes the template's MFA settings, so at
 * the first sign-in the page sets up an authenticator app (the key, then its first code), and
 * every later sign-in asks for the app's code. A wrong code is said in words. The emulator checks
 * the codes (scripts/lib/moto_server.py); the test computes them as an app does (otpauth).
 */
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { Secret, TOTP } from 'otpauth';
import { type Browser, chromium, type Page } from 'playwright-core';

const BASE = process.env.SHEETLOG_API_URL ?? '';
if (!BASE) throw new Error('SHEETLOG_API_URL is not set: run scripts/test-web');
const CHROMIUM = process.env.SHEETLOG_CHROMIUM ?? '/usr/bin/chromium';
const SHOTS = process.env.SHEETLOG_SCREENSHOTS ?? 'target/web-screenshots';
const WAIT = { timeout: 30_000 };
// The demo user and password `sheetlog dev --auth cognito` creates (functions/local/src/local_cognito.rs).
const ALICE = 'alice@example.com';
const PASSWORD = 'Sheetlog-demo-1';

/** The code an authenticator app shows for `key` now; waits out a step about to end. */
async function code(key: string): Promise<string> {
  const app = new TOTP({ secret: Secret.fromBase32(key.toUpperCase()), algorithm: 'SHA1', digits: 6, period: 30 });
  const left = 30 - (Math.floor(Date.now() / 1000) % 30);
  if (left <= 2) await new Promise((r) => setTimeout(r, (left + 1) * 1000));
  return app.generate();
}

let browser: Browser;

async function passwordStep(): Promise<Page> {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 720 } });
  const page = await ctx.newPage();
  page.on('pageerror', (e) => console.error(`page error: ${e.message}`));
  await page.goto(`${BASE}/`);
  await page.fill('form.sign-in input[aria-label="email"]', ALICE);
  await page.fill('form.sign-in input[aria-label="password"]', PASSWORD);
  await page.click('form.sign-in button[type="submit"]');
  return page;
}

async function enter(page: Page, form: string, digits: string): Promise<void> {
  await page.fill(`form.${form} input[aria-label="authenticator code"]`, digits);
  await page.click(`form.${form} button[type="submit"]`);
}

describe('sign-in with an authenticator app (cognitoMfa=required)', () => {
  before(async () => {
    mkdirSync(SHOTS, { recursive: true });
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-sync'],
    });
  });
  after(async () => {
    await browser?.close();
  });

  test('the first sign-in sets up the app; the next asks for its code', async () => {
    const first = await passwordStep();
    await first.waitForSelector('form.mfa-setup', WAIT);
    const key = (await first.locator('form.mfa-setup .mfa-key').getAttribute('data-secret')) ?? '';
    assert.match(key, /^[A-Za-z2-7]+$/, 'a base32 key is shown');
    const link = (await first.locator('form.mfa-setup a').getAttribute('href')) ?? '';
    assert.ok(link.startsWith('otpauth://totp/') && link.includes(`secret=${key}`), link);
    await first.screenshot({ path: `${SHOTS}/mfa-setup.png` });
    // A wrong first code is refused in words; the right one signs in.
    await enter(first, 'mfa-setup', '000000');
    await first.waitForFunction(() => document.querySelector('.form-error')?.textContent !== '', undefined, WAIT);
    assert.match(await first.locator('form.mfa-setup .form-error').innerText(), /code is not right/);
    await enter(first, 'mfa-setup', await code(key));
    await first.waitForSelector('table.sheets[data-loaded]', WAIT);
    await first.context().close();

    // Elsewhere, later: the password, then the app's code.
    const second = await passwordStep();
    await second.waitForSelector('form.mfa-code', WAIT);
    await second.screenshot({ path: `${SHOTS}/mfa-code.png` });
    await enter(second, 'mfa-code', await code(key));
    await second.waitForSelector('table.sheets[data-loaded]', WAIT);
    await second.context().close();
  });
});
