// Browser test of a job that a retry resumed from its checkpoint: the job
// page's Resumed and Attempts. test/e2e/checkpoint_test.go runs it with:
//   DASHBOARD_URL  the dashboard
//   JOB            a finished digits job of dev-a in team-a that failed once at epoch 5 and resumed from epoch 4 of 8
//   SHOTS          folder for screenshots
import { harness } from './harness.mjs';

const url = process.env.DASHBOARD_URL;
const job = process.env.JOB;
const shots = process.env.SHOTS ?? '.';
const { check, step, login, finish } = await harness();

await step('dev-a sees where the job resumed and how often it started again', async () => {
  const { ctx, page } = await login('dev-a');
  await page.goto(`${url}/jobs/team-a/${job}`);
  await page.getByTestId('resumed').waitFor();
  const resumed = await page.getByTestId('resumed').textContent();
  check(resumed.startsWith('resumed from epoch 4 of 8'), `Resumed says ${resumed}`);
  const attempts = await page.getByTestId('attempts').textContent();
  check(attempts === 'retry 1 of 2', `Attempts says ${attempts}`);
  await page.screenshot({ path: `${shots}/job-resumed.png`, fullPage: true });
  await ctx.close();
});

await finish('Resumed and Attempts on the job page');
