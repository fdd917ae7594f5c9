// Browser test of the create wizard against the real local cluster,
// driving Debian's chromium through playwright-core.
// test/e2e/dashboard_create_test.go runs it with:
//   DASHBOARD_URL  the dashboard
//   JOB            name of the job to create in team-a (it must Succeed);
//                  its clone, JOB-2 with 3 Workers, must Succeed too
//   OOM_JOB        team-a job that failed WorkerOOMKilled
//   OOM_MEMORY     the memory per Worker its "Edit and resubmit" must offer
//   SHOTS          folder for screenshots
//   CHROMIUM       the browser (default /usr/bin/chromium)
import { harness } from './harness.mjs';

const url = process.env.DASHBOARD_URL;
const job = process.env.JOB;
const shots = process.env.SHOTS ?? '.';

const { check, step, login, finish } = await harness();
const next = (page) => page.getByRole('button', { name: 'Next', exact: true });

await step('dev-a creates a job through the wizard', async () => {
  const { ctx, page } = await login('dev-a');
  await page.getByTestId('create').click();
  await page.waitForURL(/\/create$/);

  // Basics: the name is checked as it is typed.
  await page.getByLabel('Name', { exact: true }).fill('Bad_Name');
  await page.locator('#name-error').waitFor();
  check((await page.locator('#name-error').textContent()).includes('DNS label'), 'a bad name shows its error next to the field');
  check(await next(page).isDisabled(), 'Next is disabled while the name is bad');
  await page.screenshot({ path: `${shots}/wizard-basics-error.png` });
  await page.getByLabel('Name', { exact: true }).fill(job);
  // team-a, whatever other namespaces dev-a may create in (other tests').
  await page.getByLabel('Namespace', { exact: true }).selectOption('team-a');
  await page.getByLabel('Description', { exact: true }).fill('made by the wizard test');
  check(await enabledSoon(next(page)), 'a good name enables Next');
  await next(page).click();

  // Configuration: 0 Workers is refused before submit.
  await page.getByLabel('Workers', { exact: true }).fill('0');
  await page.locator('#workers-error').waitFor();
  check((await page.locator('#workers-error').textContent()).includes('at least 1 Worker'), '0 Workers shows its error next to the field');
  check(await next(page).isDisabled(), 'Next is disabled with 0 Workers');
  await page.screenshot({ path: `${shots}/wizard-configuration-error.png` });
  await page.getByLabel('Workers', { exact: true }).fill('2');
  // The GPU runtime with its GPUs removed: CPU Workers with no one-per-node
  // rule, so the clone's 3 Workers fit the 2 real nodes. Its Workers' CUDA
  // image is not on the local cluster's GPU-less nodes: the job runs the
  // CPU image, as a user running this runtime on CPUs would ask.
  await page.getByLabel('Runtime', { exact: true }).selectOption('mpi-openmpi-gpu');
  const info = await page.getByTestId('runtime-info').textContent();
  check(info.includes('Worker image ghcr.io/mpijob/openmpi-cuda:4.1') && info.includes('Launcher image ghcr.io/mpijob/openmpi:4.1'), `the runtime picker shows the runtime's images (${info})`);
  await page.getByLabel('Image', { exact: true }).fill('ghcr.io/mpijob/openmpi:4.1');
  await next(page).click();

  // Resources: more GPUs than team-a's quota (8), before submit.
  await page.getByLabel('GPUs per Worker').selectOption('8');
  await page.locator('#gpus-error').waitFor({ timeout: 60000 });
  const gpuErr = await page.locator('#gpus-error').textContent();
  check(gpuErr.includes('requested 16 nvidia.com/gpu') && gpuErr.includes('quota 8'), `more GPUs than the quota shows the pre-flight's numbers next to GPUs (${gpuErr})`);
  check(await next(page).isDisabled(), 'Next is disabled over quota');
  await page.screenshot({ path: `${shots}/wizard-resources-quota.png` });
  await page.getByLabel('GPUs per Worker').selectOption('0');
  await page.getByTestId('quota').filter({ hasText: 'Fits' }).waitFor({ timeout: 60000 });
  check(true, 'the quota check says the job fits once the GPUs are gone');
  check((await page.locator('#gpus-error').count()) === 0, 'the GPU error goes with them');
  // Advanced: a timeout without a unit is refused as it is typed; a
  // toleration and a good timeout go through.
  await page.getByRole('button', { name: 'Advanced' }).click();
  await page.getByLabel('Timeout', { exact: true }).fill('90');
  await page.locator('#timeout-error').waitFor();
  check((await page.locator('#timeout-error').textContent()).includes('is not a duration'), 'a timeout of "90" shows its error next to the field');
  check(await next(page).isDisabled(), 'Next is disabled with a bad timeout');
  await page.getByLabel('Timeout', { exact: true }).fill('10m');
  await page.getByLabel('Tolerations', { exact: true }).fill('mpijob.dev/wizard=yes:NoSchedule');
  check(await enabledSoon(next(page)), 'a good timeout enables Next');
  await page.screenshot({ path: `${shots}/wizard-advanced.png`, fullPage: true });
  await next(page).click();

  // Review: the summary, a dry run, the YAML, then Create.
  const summary = await page.getByTestId('summary').textContent();
  check(summary.startsWith('2 Workers × 1 slot = 2 ranks'), `the review sums the job up (${summary})`);
  check((await page.getByTestId('review-timeout').textContent()).includes('10m'), 'the review names the timeout');
  check((await page.getByTestId('review-description').textContent()).includes('made by the wizard test'), 'the review shows the description');
  await page.getByTestId('dry-run-ok').waitFor({ timeout: 60000 });
  check(true, 'the dry run (admission included) accepts the job');
  const placed = await page.getByTestId('dry-run-placement').textContent();
  // Fits or not depends on what other jobs hold on the real nodes now; the
  // answer names the Workers either way.
  // dev-a may not list nodes: the cluster's free GPUs are not said to a tenant.
  check(placed.includes('Can the cluster place it now?') && /(fits now: the Launcher and 2 Workers|does not fit now: )/.test(placed) && !placed.includes('free GPUs now:') && placed.includes('Kueue queue team-a/default'),
    `the review says whether the cluster can place the job now, without the cluster's free GPUs (${placed})`);
  await page.getByRole('button', { name: 'View YAML' }).click();
  await page.waitForTimeout(500); // the section's opening animation, for the screenshot
  check((await page.locator('pre').first().textContent()).includes('kind: TrainJob'), 'View YAML shows the TrainJob');
  await page.screenshot({ path: `${shots}/wizard-review.png`, fullPage: true });
  await page.getByRole('button', { name: 'Create', exact: true }).click();
  await page.waitForURL(new RegExp(`/jobs/team-a/${job}$`), { timeout: 60000 });
  check(true, 'Create opens the new job');
  // The phase badge in the page header (the phase stepper below names
  // every phase, Succeeded included, at all times).
  // What the wizard set beyond the shape is on the job's page, as describe shows it.
  await page.getByText('10m (the job is stopped after it)').waitFor({ timeout: 60000 });
  check(true, 'the job page shows the timeout the wizard set');
  check(await page.getByText('made by the wizard test').first().isVisible(), 'the job page shows the description the wizard set');
  const first = await page.getByTestId('phase').first().getAttribute('data-phase');
  check(first !== 'Succeeded', `the new job is ${first} when its page opens`);
  await page.locator('[data-testid="phase"][data-phase="Succeeded"]').waitFor({ timeout: 180000 });
  check(true, 'the job created by the wizard Succeeds on the real nodes');
  await page.screenshot({ path: `${shots}/wizard-created-job.png` });

  // Clone with 3 Workers.
  await page.getByTestId('clone').click();
  await page.waitForURL(/\/create\?from=/);
  await page.getByTestId('origin').waitFor();
  await page.waitForFunction((n) => document.querySelector('#name')?.value === n, `${job}-2`);
  check(true, `Clone opens the wizard filled from ${job}, named ${job}-2`);
  await next(page).click();
  check((await page.getByLabel('Runtime', { exact: true }).inputValue()) === 'mpi-openmpi-gpu', 'the clone keeps the runtime');
  await page.getByLabel('Workers', { exact: true }).fill('3');
  await next(page).click();
  check((await page.getByLabel('GPUs per Worker').inputValue()) === '0', 'the clone keeps the GPUs removed');
  await next(page).click();
  await page.getByTestId('dry-run-ok').waitFor({ timeout: 60000 });
  check((await page.getByTestId('summary').textContent()).startsWith('3 Workers'), 'the clone has 3 Workers');
  await page.getByRole('button', { name: 'Create', exact: true }).click();
  await page.waitForURL(new RegExp(`/jobs/team-a/${job}-2$`), { timeout: 60000 });
  await page.locator('[data-testid="phase"][data-phase="Succeeded"]').waitFor({ timeout: 180000 });
  check(true, 'the clone with 3 Workers Succeeds');
  await ctx.close();
});

await step('dev-a edits and resubmits a job killed for memory', async () => {
  const { ctx, page } = await login('dev-a');
  await page.goto(`${url}/jobs/team-a/${process.env.OOM_JOB}`);
  await page.getByTestId('resubmit').click();
  await page.getByTestId('origin').waitFor();
  const origin = await page.getByTestId('origin').textContent();
  check(origin.includes(`to ${process.env.OOM_MEMORY}`), `Edit and resubmit says what it changed (${origin})`);
  await page.getByLabel('Name', { exact: true }).waitFor();
  await next(page).click();
  await next(page).click();
  const mem = await page.getByLabel('Memory per Worker').inputValue();
  check(mem === process.env.OOM_MEMORY, `the memory per Worker is raised to ${process.env.OOM_MEMORY} (got ${mem})`);
  await page.getByTestId('quota').filter({ hasText: 'Fits' }).waitFor({ timeout: 60000 });
  check(await enabledSoon(next(page)), 'the raised memory fits the quota and the resubmit can go on');
  await page.screenshot({ path: `${shots}/wizard-resubmit-oom.png` });
  await ctx.close();
});

await step('viewer-a cannot create', async () => {
  const { ctx, page } = await login('viewer-a');
  await page.getByRole('heading', { name: 'Training jobs' }).waitFor();
  check((await page.getByTestId('create').count()) === 0, 'viewer-a sees no Create');
  await page.goto(url + '/create');
  await page.getByTestId('no-create').waitFor();
  check(true, 'the wizard tells viewer-a they may not create jobs');
  await ctx.close();
});

await finish('wizard');

// enabledSoon waits up to 5 s for a button to become enabled: the wizard
// re-validates after each keystroke (and asks the server about quota), so a
// loaded machine may take a moment to re-render.
async function enabledSoon(locator) {
  for (let i = 0; i < 50; i++) {
    if (!(await locator.isDisabled())) return true;
    await new Promise((r) => setTimeout(r, 100));
  }
  return false;
}
