// Browser test of the Logs tab's rank facet and the diagnosis of a stuck
// rank, against the real local cluster. test/e2e/ranks_test.go runs it with:
//   DASHBOARD_URL  the dashboard
//   JOB            a running OpenMPI job of dev-a in team-a whose rank 1 raised while rank 0 waits
//   SHOTS          folder for screenshots
import { harness } from './harness.mjs';

const url = process.env.DASHBOARD_URL;
const job = process.env.JOB;
const shots = process.env.SHOTS ?? '.';
const { check, step, login, finish } = await harness();

await step('the Overview names the stuck rank and the fix', async () => {
  const { ctx, page } = await login('dev-a');
  await page.goto(`${url}/jobs/team-a/${job}`);
  await page.getByTestId('reason').filter({ hasText: 'RankFailedOthersWaiting' }).waitFor();
  const text = await page.getByTestId('diagnosis').textContent();
  check(text.includes('Rank 1 (Worker 1) failed at'), 'the message names rank 1 and its Worker');
  check(text.includes('python -m mpi4py'), 'the first next step is python -m mpi4py');
  await page.screenshot({ path: `${shots}/job-stuck-rank.png`, fullPage: true });
  await ctx.close();
});

await step('the rank facet selects real ranks', async () => {
  const { ctx, page } = await login('dev-a');
  await page.goto(`${url}/jobs/team-a/${job}?tab=logs`);
  const log = page.getByTestId('log');
  // The first lines may wait behind a loaded API server (CI runs the
  // integration tests beside this one): the facet is what is checked here.
  await page.waitForFunction(() => (document.querySelector('[data-testid=log]')?.textContent ?? '').includes('RuntimeError'), null, { timeout: 90000 });
  await page.getByTestId('rank-filter').fill('1');
  await page.waitForFunction(() => !(document.querySelector('[data-testid=log]')?.textContent ?? '').includes('[1,0]'), null, { timeout: 60000 });
  // One row per line (PatternFly's LogViewer).
  const lines = (await log.locator('.pf-v6-c-log-viewer__text').allTextContents()).filter((l) => l.trim() !== '');
  check(lines.length >= 2 && lines.every((l) => l.startsWith('[1,1]<')), `rank 1 shows only rank 1's lines (${lines.length}: ${lines.slice(0, 3).join(' / ')})`);
  check(lines.some((l) => l.includes('RuntimeError: rank one cannot go on')), 'with its error');
  await page.screenshot({ path: `${shots}/job-logs-rank.png`, fullPage: true });
  await page.getByTestId('rank-filter').fill('0-1');
  await page.waitForFunction(() => (document.querySelector('[data-testid=log]')?.textContent ?? '').includes('[1,0]'), null, { timeout: 60000 });
  check(true, 'ranks 0-1 show rank 0 again');
  await page.getByTestId('rank-filter').fill('1-');
  await page.getByTestId('rank-error').waitFor({ timeout: 60000 });
  check((await page.getByTestId('rank-error').textContent()).includes('give a rank number'), 'a typo says how to write ranks');
  await ctx.close();
});

await finish('rank facet');
