/**
 * Helpers of the browser tests of a cognito-mode stack: Chromium pages of the web spreadsheet,
 * signed in through the page's own form, as a person signs in. Used by sharing.test.mts (the local
 * stack) and integ.test.mts (the local stack, or a deployed one from `scripts/integ --auth
 * cognito`). Nothing here talks to the emulator: it works the same against AWS.
 */
import { mkdirSync } from 'node:fs';
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';

export const CHROMIUM = process.env.SHEETLOG_CHROMIUM ?? '/usr/bin/chromium';
export const SHOTS = process.env.SHEETLOG_SCREENSHOTS ?? 'target/web-screenshots';
export const WAIT = { timeout: 30_000 };

/** Browser contexts of one Chromium, one per person (so each has its own local storage). */
export class Pages {
  private browser: Browser | undefined;
  private readonly contexts: BrowserContext[] = [];

  constructor(readonly base: string) {}

  async launch(): Promise<void> {
    mkdirSync(SHOTS, { recursive: true });
    this.browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-sync'],
    });
  }

  async close(): Promise<void> {
    for (const c of this.contexts) await c.close().catch(() => {});
    await this.browser?.close();
  }

  /** A page in a new context whose local storage starts with `storage` (`sheetlog.rolePollMs`, …). */
  async newPage(storage: Record<string, string> = {}): Promise<Page> {
    if (!this.browser) throw new Error('Pages.launch() first');
    const ctx = await this.browser.newContext({ viewport: { width: 1280, height: 720 } });
    this.contexts.push(ctx);
    if (Object.keys(storage).length)
      await ctx.addInitScript((s) => {
        for (const [k, v] of Object.entries(s)) localStorage.setItem(k, v);
      }, storage);
    const page = await ctx.newPage();
    page.on('pageerror', (e) => console.error(`page error: ${e.message}`));
    if (process.env.SHEETLOG_WEB_DEBUG) page.on('console', (m) => console.error(`console: ${m.text()}`));
    return page;
  }

  /** Opens the page and signs in through its form, as a person does; resolves on the sheet list. */
  async signIn(email: string, password: string, storage: Record<string, string> = {}): Promise<Page> {
    const page = await this.newPage(storage);
    await page.goto(`${this.base}/`);
    await page.fill('form.sign-in input[aria-label="email"]', email);
    await page.fill('form.sign-in input[aria-label="password"]', password);
    await page.click('form.sign-in button[type="submit"]');
    await page.waitForSelector('table.sheets[data-loaded]', WAIT);
    return page;
  }
}

export async function shot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: `${SHOTS}/${name}.png` });
}

/** Clicks a cell, types, presses Enter: as a person edits a spreadsheet. */
export async function edit(page: Page, ref: string, text: string): Promise<void> {
  await page.click(`[data-ref="${ref}"]`);
  await page.keyboard.type(text);
  await page.keyboard.press('Enter');
}

export async function waitCell(page: Page, ref: string, text: string, wait = WAIT): Promise<void> {
  await page.waitForFunction(
    ([r, t]) => document.querySelector(`[data-ref="${r}"]`)?.textContent === t,
    [ref, text] as const,
    wait,
  );
}

/** Sets a member's role in the share dialog of the sheet open on `page` (the dialog stays open). */
export async function shareAs(page: Page, email: string, role: string): Promise<void> {
  await page.click('header button.share');
  await page.waitForSelector('dialog.share[data-loaded]', WAIT);
  const row = page.locator(`dialog.share li[data-email="${email}"]`);
  if (await row.count()) {
    await row.locator('select').selectOption(role);
  } else {
    await page.fill('dialog.share input[aria-label="email"]', email);
    await page.selectOption('dialog.share select[aria-label="new member role"]', role);
    await page.click('dialog.share button[type="submit"]');
  }
  await page.waitForSelector(`dialog.share li[data-email="${email}"][data-role="${role}"]`, WAIT);
}
