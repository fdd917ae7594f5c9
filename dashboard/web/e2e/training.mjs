// Browser test of a training job's Training and Artifacts tabs, the job
// list's Progress column and the wizard's data connections, against the
// real local cluster and its S3 store. test/e2e/training_test.go runs it with:
//   DASHBOARD_URL  the dashboard
//   JOB            a finished digits job of dev-a in team-a, 30 epochs, with data connection local-s3
//   SHOTS          folder for screenshots
import { harness } from './harness.mjs';

const url = process.env.DASHBOARD_URL;
const job = process.env.JOB;
const shots = process.env.SHOTS ?? '.';
const { check, step, login, finish } = await harness();

await step('dev-a sees progress and charts on the Training tab', async () => {
  const { ctx, page } = await login('dev-a');
  await page.goto(`${url}/jobs/team-a/${job}`);
  await page.getByTestId('overview-progress').waitFor();
  check((await page.getByTestId('overview-progress').textContent()).includes('100% · epoch 30/30'), 'the Overview says the progress');
  await page.getByRole('tab', { name: 'Training' }).click();
  await page.getByTestId('progress-bar').waitFor();
  const loss = page.getByTestId('chart-loss');
  await loss.waitFor();
  check(Number(await loss.getAttribute('data-points')) === 30, `the loss chart has a point per epoch (${await loss.getAttribute('data-points')})`);
  check((await page.getByTestId('chart-accuracy').count()) === 1, 'an accuracy chart');
  const acc = Number(await page.getByTestId('metric-accuracy').textContent());
  check(acc >= 0.95, `the last accuracy is shown (${acc})`);
  check((await loss.locator('svg path').count()) > 0, 'the loss line is drawn');
  const steps = await page.getByTestId('step-times').textContent();
  check(/\(\d+ ranks\): median \d/.test(steps), `the ranks' step times are shown (${steps})`);
  await page.screenshot({ path: `${shots}/job-training.png`, fullPage: true });
  await ctx.close();
});

await step('dev-a lists and downloads the artifacts', async () => {
  const { ctx, page } = await login('dev-a');
  await page.goto(`${url}/jobs/team-a/${job}?tab=artifacts`);
  await page.getByTestId('artifacts').waitFor();
  for (const f of ['model.npz', 'metrics.json']) check((await page.getByTestId(`artifact-${f}`).count()) === 1, `${f} is listed`);
  const text = await page.getByTestId('artifacts').textContent();
  check(text.includes(`s3://team-a/${job}/`) && text.includes('local-s3'), 'it says where they are');
  const [download] = await Promise.all([
    page.waitForEvent('download'),
    page.getByTestId('artifact-metrics.json').getByRole('link', { name: 'Download' }).click(),
  ]);
  const body = await (await download.createReadStream()).toArray();
  const metrics = JSON.parse(Buffer.concat(body).toString());
  check(metrics.accuracy >= 0.95 && metrics.test_indices.length === 360, `metrics.json downloads (accuracy ${metrics.accuracy})`);
  await page.screenshot({ path: `${shots}/job-artifacts.png`, fullPage: true });
  await ctx.close();
});

await step('the job list has a Progress column', async () => {
  const { ctx, page } = await login('dev-a');
  await page.goto(`${url}/?namespace=team-a`);
  const cell = page.getByTestId(`progress-${job}`);
  await cell.waitFor();
  check((await cell.textContent()).startsWith('100%'), `the row says ${await cell.textContent()}`);
  await ctx.close();
});

await step('the wizard offers the project\'s data connections', async () => {
  const { ctx, page } = await login('dev-a');
  await page.getByTestId('create').click();
  await page.waitForURL(/\/create$/);
  await page.getByLabel('Name', { exact: true }).fill('wizard-data');
  const next = page.getByRole('button', { name: 'Next', exact: true });
  for (let i = 0; i < 50 && (await next.isDisabled()); i++) await page.waitForTimeout(100);
  await next.click();
  await page.getByTestId('data-connections').waitFor({ timeout: 60000 });
  await page.getByLabel('local-s3').waitFor({ timeout: 60000 });
  check((await page.getByLabel('local-s3').count()) === 1, 'local-s3 is offered');
  await page.getByTestId('data-connections').scrollIntoViewIfNeeded();
  await page.screenshot({ path: `${shots}/create-data-connections.png`, fullPage: true });
  await ctx.close();
});

await step('dev-b sees no artifacts of team-a', async () => {
  const { ctx, page } = await login('dev-b');
  const res = await page.request.get(`${url}/api/jobs/team-a/${job}/artifacts`);
  check(res.status() === 403 || res.status() === 404, `the API refuses dev-b (${res.status()})`);
  await ctx.close();
});

await finish('Training and Artifacts tabs');
