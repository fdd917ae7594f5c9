// Browser test of the job page's Metrics tab against the real local
// cluster: a job that ran 45 s shows CPU and memory lines for its Launcher
// and both Workers, with its phases as bands; dev-b sees none of it.
// test/e2e/metrics_test.go runs it with:
//   DASHBOARD_URL  the dashboard
//   JOB            a finished job of dev-a in team-a with 2 Workers
//   SHOTS          folder for screenshots
import { harness } from './harness.mjs';

const url = process.env.DASHBOARD_URL;
const job = process.env.JOB;
const shots = process.env.SHOTS ?? '.';
const { check, step, login, finish } = await harness();

await step('dev-a opens the Metrics tab', async () => {
  const { ctx, page } = await login('dev-a');
  await page.goto(`${url}/jobs/team-a/${job}`);
  await page.getByRole('tab', { name: 'Metrics' }).click();
  check(new URL(page.url()).searchParams.get('tab') === 'metrics', 'the tab is in the address, to share');
  for (const metric of ['cpu', 'memory']) {
    const chart = page.getByTestId(`chart-${metric}`);
    await chart.waitFor();
    const series = Number(await chart.getAttribute('data-series'));
    const points = Number(await chart.getAttribute('data-points'));
    check(series === 3, `${metric}: a line for the Launcher and each of 2 Workers (${series})`);
    check(points >= 3 * 4, `${metric}: the lines have points over the job's life (${points})`);
    const lines = await chart.locator('svg path[role="presentation"], svg path').count();
    check(lines > 3, `${metric}: the chart draws its lines (${lines} paths)`);
    const text = await chart.textContent();
    for (const name of ['Launcher', 'Worker 0', 'Worker 1']) check(text.includes(name), `${metric}: the legend names ${name}`);
  }
  const bands = page.getByTestId('phase-bands');
  const phases = await bands.locator('[data-phase]').evaluateAll((els) => els.map((e) => e.getAttribute('data-phase')));
  check(phases.includes('Running') && phases[phases.length - 1] === 'Succeeded', `the phases show as bands, Running to Succeeded (${phases.join(', ')})`);
  check((await page.getByTestId('no-gpu-metrics').count()) === 1, 'a CPU job says why it has no GPU chart');
  await page.screenshot({ path: `${shots}/job-metrics.png`, fullPage: true });
  await ctx.close();
});

await step('dev-b sees no metrics of team-a', async () => {
  const { ctx, page } = await login('dev-b');
  await page.goto(`${url}/jobs/team-a/${job}?tab=metrics`);
  await page.getByTestId('gone').waitFor({ timeout: 60000 });
  check((await page.getByTestId('chart-cpu').count()) === 0, 'no chart for another team');
  await ctx.close();
});

await finish('Metrics tab');
