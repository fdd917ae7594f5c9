// Browser test of the Stacks tab, against the real local cluster.
// test/e2e/stacks_test.go runs it with:
//   DASHBOARD_URL  the dashboard
//   JOB            a running job of dev-a in team-a: ranks 0-2 in comm.Allreduce, rank 3 in comm.recv
//   SHOTS          folder for screenshots
import { harness } from './harness.mjs';

const url = process.env.DASHBOARD_URL;
const job = process.env.JOB;
const shots = process.env.SHOTS ?? '.';
const { check, step, login, finish } = await harness();

await step('the Stacks tab groups the ranks and names the odd one out', async () => {
  const { ctx, page } = await login('dev-a');
  await page.goto(`${url}/jobs/team-a/${job}?tab=stacks`);
  await page.getByTestId('take-stacks').click();
  await page.getByTestId('stacks-contrast').waitFor({ timeout: 60000 });
  const contrast = await page.getByTestId('stacks-contrast').textContent();
  check(contrast.includes('Rank 3 waits in comm.recv while ranks 0-2 wait in comm.Allreduce'), `the contrast names rank 3 (${contrast})`);
  const groups = page.getByTestId('stack-group');
  check((await groups.count()) === 2, 'two groups');
  const first = await groups.nth(0).textContent();
  check(first.includes('ranks 0-2 (3): comm.Allreduce') && first.includes('comm.Allreduce(np.ones(4), np.empty(4), op=MPI.SUM)'), 'the first group shows its call and its line of code');
  const second = await groups.nth(1).textContent();
  check(second.includes('rank 3 on Worker 1: comm.recv') && second.includes('wait_for_peer()'), 'the second group is rank 3 in wait_for_peer');
  await page.screenshot({ path: `${shots}/job-stacks.png`, fullPage: true });
  await page.getByTestId('take-stacks').click();
  await page.getByTestId('take-stacks').filter({ hasText: 'Take them again' }).waitFor();
  check((await page.getByTestId('stack-group').count()) === 2, 'taking them again shows the same groups (the ranks kept running)');
  await ctx.close();
});

await finish('stacks tab');
