// Browser test of a job whose model could not be registered when it
// succeeded (--register-model with the registry down): the job page shows
// it Succeeded, with the warning, what failed and the command that
// registers it later. test/e2e/registry_create_test.go runs it with:
//   DASHBOARD_URL  the dashboard
//   JOB            a succeeded job of dev-a in team-a whose registration failed
//   COMMAND        the command its status gives
//   SHOTS          folder for screenshots
import { harness } from './harness.mjs';

const url = process.env.DASHBOARD_URL;
const job = process.env.JOB;
const command = process.env.COMMAND;
const shots = process.env.SHOTS ?? '.';
const { check, step, login, finish } = await harness();

await step('the job page says Succeeded, the warning and the command', async () => {
  const { ctx, page } = await login('dev-a');
  await page.goto(`${url}/jobs/team-a/${job}`);
  await page.getByTestId('diagnosis').waitFor();
  const phase = await page.getByTestId('phase').first().getAttribute('data-phase');
  check(phase === 'Succeeded', `the phase is ${phase}`);
  const reason = await page.getByTestId('reason').textContent();
  check(reason === 'ModelRegistrationFailed', `the reason is ${reason}`);
  const text = await page.getByTestId('diagnosis').textContent();
  check(text.includes('Training completed, but model upload failed. Manual upload required.'), `the diagnosis says ${text}`);
  check(text.includes('could not be reached'), `the diagnosis says what failed: ${text}`);
  check(text.includes(command), `the diagnosis gives ${command}: ${text}`);
  await page.screenshot({ path: `${shots}/job-registration-failed.png`, fullPage: true });
  await ctx.close();
});

await finish('the registration warning on the job page');
