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
  async function step(name, fn) {
    try {
      await fn();
    } catch (e) {
      check(false, `${name}: ${e.message.split('\n')[0]}`);
    }
  }
  async function login(user) {
    const ctx = await browser.newContext({ viewport });
    const page = await ctx.newPage();
    await page.goto(url + '/');
    await page.waitForURL(/\/login/);
    await page.getByLabel('User').selectOption(user);
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.waitForURL((u) => !u.pathname.startsWith('/login'));
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
