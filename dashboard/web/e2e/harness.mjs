// What every browser test script shares: Debian's chromium through
// playwright-core, ok/FAIL lines, steps that fail without stopping the
// others, and logging in on the dashboard's login page.
//   DASHBOARD_URL  the dashboard
//   SHOTS          folder for screenshots (made if missing)
//   CHROMIUM       the browser (default /usr/bin/chromium)
import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';

export async function harness({ viewport = { width: 1400, height: 1000 } } = {}) {
  const url = process.env.DASHBOARD_URL;
  const shots = process.env.SHOTS ?? '.';
  mkdirSync(shots, { recursive: true });
  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium', args: ['--no-sandbox'] });
  const failures = [];
  function check(cond, msg) {
    if (!cond) failures.push(msg);
    console.log(`${cond ? 'ok  ' : 'FAIL'} ${msg}`);
  }
  // The page a step last logged in with: a failed step leaves a
  // screenshot of it and says what it showed, so a failure that happens
  // only under CI's load can be read afterwards.
  let last = null;
  async function step(name, fn) {
    last = null;
    try {
      await fn();
    } catch (e) {
      check(false, `${name}: ${e.message.split('\n')[0]}`);
      if (last && !last.isClosed()) {
        const file = `${shots}/FAILED-${name.replace(/[^a-z0-9]+/gi, '-').slice(0, 60)}.png`;
        await last.screenshot({ path: file, fullPage: true }).catch(() => {});
        const text = await last.locator('body').innerText({ timeout: 2000 }).catch(() => '(unreadable)');
        console.log(`     at ${last.url()}; screenshot ${file}; the page showed:\n${text.slice(0, 1500).replace(/^/gm, '       | ')}`);
        await last.context().close().catch(() => {});
      }
    }
  }
  async function login(user) {
    const ctx = await browser.newContext({ viewport });
    // A wait is for the dashboard's round trip to a busy API server (CI
    // runs tests side by side on two cores), not a speed target: a minute,
    // not Playwright's 30 s.
    ctx.setDefaultTimeout(60000);
    const page = await ctx.newPage();
    await page.goto(url + '/');
    await page.waitForURL(/\/login/);
    await page.getByLabel('User').selectOption(user);
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.waitForURL((u) => !u.pathname.startsWith('/login'));
    last = page;
    return { ctx, page };
  }
  // finish closes the browser and exits 1 when a check failed.
  async function finish(what) {
    await browser.close();
    if (failures.length) {
      console.log(`\n${failures.length} ${what} check(s) failed`);
      process.exit(1);
    }
  }
  return { url, shots, browser, check, step, login, finish };
}
