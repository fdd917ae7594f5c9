import { harness } from './harness.mjs';
const h = await harness();
const { page } = await h.login('dev-a');
await page.goto(`${h.url}/jobs/team-a/hello-d`);
await page.getByText('Resources').first().waitFor();
await page.waitForTimeout(1000);
await page.screenshot({ path: `${h.shots}/detail.png`, fullPage: true });
console.log(await page.locator('dl').first().innerText());
await h.finish('x');
