// Browser test of the Artifacts tab's Register: a succeeded job's model goes
// to the model registry as the user. test/e2e/registry_test.go runs it with:
//   DASHBOARD_URL  the dashboard
//   JOB            a succeeded digits job of dev-a in team-a whose model.npz is registered as MODEL:v1 already
//   MODEL          that model's name
//   SHOTS          folder for screenshots
import { harness } from './harness.mjs';

const url = process.env.DASHBOARD_URL;
const job = process.env.JOB;
const model = process.env.MODEL;
const shots = process.env.SHOTS ?? '.';
const { check, step, login, finish } = await harness();

await step('dev-a registers a new version from the Artifacts tab, after a typo', async () => {
  const { ctx, page } = await login('dev-a');
  await page.goto(`${url}/jobs/team-a/${job}?tab=artifacts`);
  await page.getByTestId('register-open').waitFor();
  await page.getByTestId('register-open').click();
  const typo = model.replace('classifier', 'clasifier');
  await page.getByTestId('register-name').fill(typo);
  await page.getByTestId('register-version').fill('ui-1');
  await page.getByTestId('register-submit').click();
  await page.getByTestId('register-use-near').waitFor();
  const help = await page.getByTestId('register-name-help').textContent();
  check(help.includes(`did you mean ${model}`), `the typo's help says ${help}`);
  await page.screenshot({ path: `${shots}/job-register-typo.png`, fullPage: true });
  await page.getByTestId('register-use-near').click();
  await page.getByTestId('register-done').waitFor();
  const done = await page.getByTestId('register-done').textContent();
  check(done.includes(`Registered version ui-1 of ${model}`) && done.includes('s3://team-a/'), `the answer says ${done}`);
  await page.screenshot({ path: `${shots}/job-register-done.png`, fullPage: true });
  await ctx.close();
});

await step('the same version again changes nothing, and says so', async () => {
  const { ctx, page } = await login('dev-a');
  await page.goto(`${url}/jobs/team-a/${job}?tab=artifacts`);
  await page.getByTestId('register-open').click();
  await page.getByTestId('register-name').fill(model);
  await page.getByTestId('register-version').fill('v1');
  await page.getByTestId('register-submit').click();
  await page.getByTestId('register-done').waitFor();
  const done = await page.getByTestId('register-done').textContent();
  check(done.includes('already registered from this job: nothing changed'), `the answer says ${done}`);
  await ctx.close();
});

await step('a name with a space is refused at the field', async () => {
  const { ctx, page } = await login('dev-a');
  const res = await page.request.post(`${url}/api/jobs/team-a/${job}/register`, { data: { name: 'digits classifier' }, headers: { Origin: url } });
  const body = await res.json();
  check(res.status() === 400 && body.field === 'name' && body.error.includes('"digits classifier"'), `answer ${res.status()} ${JSON.stringify(body)}`);
  await ctx.close();
});

await step('dev-b cannot register team-a\'s job', async () => {
  const { ctx, page } = await login('dev-b');
  const res = await page.request.post(`${url}/api/jobs/team-a/${job}/register`, { data: { name: model, version: 'dev-b' }, headers: { Origin: url } });
  const body = await res.json();
  check(res.status() === 403 && body.error.includes('dev-b') && body.error.includes('trainjobs'), `dev-b's registration answered ${res.status()} ${JSON.stringify(body)}`);
  await ctx.close();
});

await finish('Register on the Artifacts tab');
