// Browser test of the dashboard's runtimes page against the real local
// cluster: Test runtime passes on a shipped runtime and fails the image
// pull check, naming the image, on a broken one; viewer-a cannot test.
// test/e2e/dashboard_create_test.go runs it with:
//   DASHBOARD_URL   the dashboard
//   BROKEN_RUNTIME  a runtime whose images cannot be pulled
//   BROKEN_IMAGE    that image
//   NEW_RUNTIME     name of the runtime admin creates from mpi-openmpi
//   SHOTS           folder for screenshots
import { harness } from './harness.mjs';

const url = process.env.DASHBOARD_URL;
const broken = process.env.BROKEN_RUNTIME;
const shots = process.env.SHOTS ?? '.';
const { check, step, login, finish } = await harness();

await step('dev-a tests runtimes', async () => {
  const { ctx, page } = await login('dev-a');
  await page.getByTestId('nav-runtimes').click();
  const good = page.getByTestId('runtime-mpi-openmpi');
  await good.waitFor();
  check((await good.textContent()).includes('ghcr.io/mpijob/openmpi:4.1'), 'the runtime shows its images');
  const bad = page.getByTestId(`runtime-${broken}`);
  check((await page.getByRole('button', { name: 'Use as template' }).count()) === 0, 'dev-a may not make runtimes: no template button');
  // dev-a may see other namespaces too (a test beside this one grants it one): test in team-a,
  // whose queue exists, not in whichever namespace the list shows first.
  await good.getByLabel('Namespace for testing mpi-openmpi').selectOption('team-a');
  await bad.getByLabel(`Namespace for testing ${broken}`).selectOption('team-a');
  await good.getByRole('button', { name: 'Test runtime' }).click();
  await bad.getByRole('button', { name: 'Test runtime' }).click();
  await good.locator('[data-testid="check-image pull"]').waitFor();
  check(true, 'the checks show while the test runs');
  await good.locator('[data-testid="check-MPI spawn"][data-result="PASS"]').waitFor({ timeout: 240000 });
  for (const name of ['image pull', 'SSH key mount', 'MPI spawn']) {
    const r = await good.locator(`[data-testid="check-${name}"]`).getAttribute('data-result');
    check(r === 'PASS', `mpi-openmpi: ${name} ${r}`);
  }
  await bad.locator('[data-testid="check-image pull"][data-result="FAIL"]').waitFor({ timeout: 240000 });
  const detail = await bad.locator('[data-testid="check-image pull"]').textContent();
  check(detail.includes(process.env.BROKEN_IMAGE), `the broken runtime fails the image pull check naming ${process.env.BROKEN_IMAGE} (${detail})`);
  await page.screenshot({ path: `${shots}/runtimes-test.png`, fullPage: true });
  await ctx.close();
});

await step('admin creates a runtime from a template and tests it', async () => {
  const { ctx, page } = await login('admin');
  await page.goto(url + '/runtimes');
  const tmpl = page.getByTestId('runtime-mpi-openmpi');
  await tmpl.getByRole('button', { name: 'Use as template' }).click();
  const form = page.getByTestId('template-mpi-openmpi');
  await form.getByLabel('Name', { exact: true }).fill(process.env.NEW_RUNTIME);
  await form.getByLabel('Description', { exact: true }).fill('OpenMPI for small jobs');
  await form.getByLabel('Policy: max-workers').fill('lots');
  await form.getByRole('button', { name: 'Create runtime' }).click();
  await form.getByTestId('error-policy.max-workers').waitFor({ timeout: 60000 });
  check(true, `a bad policy value is shown next to its field (${await form.getByTestId('error-policy.max-workers').textContent()})`);
  await form.getByLabel('Policy: max-workers').fill('4');
  await form.getByRole('button', { name: 'Create runtime' }).click();
  const card = page.getByTestId(`runtime-${process.env.NEW_RUNTIME}`);
  await card.waitFor({ timeout: 60000 });
  check((await card.textContent()).includes('max-workers: 4'), 'the new runtime is listed with its policy');
  await card.getByLabel(`Namespace for testing ${process.env.NEW_RUNTIME}`).selectOption('team-a');
  await card.getByRole('button', { name: 'Test runtime' }).click();
  await card.locator('[data-testid="check-MPI spawn"][data-result="PASS"]').waitFor({ timeout: 240000 });
  for (const name of ['image pull', 'SSH key mount', 'MPI spawn']) {
    const r = await card.locator(`[data-testid="check-${name}"]`).getAttribute('data-result');
    check(r === 'PASS', `${process.env.NEW_RUNTIME}: ${name} ${r}`);
  }
  await ctx.close();
});

await step('viewer-a cannot test', async () => {
  const { ctx, page } = await login('viewer-a');
  await page.goto(url + '/runtimes');
  await page.getByTestId('runtime-mpi-openmpi').waitFor();
  check((await page.getByRole('button', { name: 'Test runtime' }).count()) === 0, 'viewer-a sees the runtimes but no Test runtime');
  check((await page.getByRole('button', { name: 'Use as template' }).count()) === 0, 'viewer-a cannot make runtimes');
  await ctx.close();
});

await finish('runtime');
