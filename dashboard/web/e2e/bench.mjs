// The browser half of bench/dashboard: prints "FCP_MS ROWS_MS CHANGE_MS".
import { chromium } from 'playwright-core';

const url = process.env.DASHBOARD_URL;
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium', args: ['--no-sandbox'] });
const ctx = await browser.newContext({ viewport: { width: 1400, height: 900 }, extraHTTPHeaders: { Authorization: `Bearer ${process.env.TOKEN}` } });
const page = await ctx.newPage();
const t0 = Date.now();
await page.goto(`${url}/?namespace=${process.env.NAMESPACE}`);
await page.getByTestId('jobs').locator('tbody tr').first().waitFor({ timeout: 30_000 });
const rows = Date.now() - t0;
const fcp = await page.evaluate(() => performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? -1);
// A change: the newest job (first row) is deleted through the API; time until its row is gone.
const first = (await page.getByTestId('jobs').locator('tbody tr').first().getAttribute('data-testid')).slice(4);
const t1 = Date.now();
await fetch(`${url}/api/jobs/${process.env.NAMESPACE}/${first}`, { method: 'DELETE', headers: { Authorization: `Bearer ${process.env.TOKEN}` } });
await page.getByTestId(`job-${first}`).waitFor({ state: 'detached', timeout: 30_000 });
const change = Date.now() - t1;
await browser.close();
console.log(`${fcp.toFixed(0)} ${rows} ${change}`);
