//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/diagnose"
	"github.com/mpijob/mpijob/pkg/localcluster"
	"github.com/mpijob/mpijob/test/framework"
)

// A job created with --register-model has its model registered by
// mpijob-manager when it succeeds, in the real registry, with the job's
// provenance and its creator as the author. With the registry down, the
// job stays Succeeded with the seed's warning and the one command that
// registers it later, in its status, its Event and every interface; once
// the registry answers again, the command works and the manager's next
// try records it.
func TestCreateRegistersModel(t *testing.T) {
	t.Parallel()
	framework.HeavyCPU(t)
	c := framework.Get(t)
	const ns, user = "team-a", "dev-a"
	opts := startRegistry(t)
	model := framework.UniqueName("auto-digits")
	create := func(name, ref string, extra ...string) result {
		args := append([]string{"create", name, "--workers", "2", "--slots-per-worker", "1", "--register-model", ref}, extra...)
		return mpijob(t, user, ns, append(args, digitsCommand("--epochs", "2", "--output", "from-env")...)...)
	}
	dc := []string{"--data-connection", localcluster.DataConnectionName}

	t.Run("bad input names the field, the value and the fix, and creates nothing", func(t *testing.T) {
		bad := framework.UniqueName("reg-bad")
		expect(t, create(bad, "my model:v1", dc...), 2, `--register-model (model name) "my model"`)
		expect(t, create(bad, model+":v 1", dc...), 2, `--register-model (version) "v 1"`)
		expect(t, create(bad, model+":v1"), 2, "--register-model", "data connection")
		expect(t, mpijob(t, user, ns, "get", bad), 3, "not found")
	})

	name := framework.UniqueName("reg-auto")
	expect(t, create(name, model+":v1", dc...), 0, "created")
	t.Cleanup(func() { mpijob(t, user, ns, "delete", name) })
	down := framework.UniqueName("reg-down")

	t.Run("registered by mpijob-manager when the job succeeds", func(t *testing.T) {
		if got := c.WaitForTrainJob(t, ns, name, 8*time.Minute, trainer.TrainJobComplete, trainer.TrainJobFailed); got != trainer.TrainJobComplete {
			t.Fatalf("%s ended %s", name, got)
		}
		st := c.WaitForStatus(t, ns, name, 2*time.Minute, func(s api.Status) bool {
			return s.Phase == api.PhaseSucceeded && strings.Contains(s.Message, "is registered in the model registry")
		})
		if st.Reason != "" || !strings.Contains(st.Message, "Model "+model+" version v1 is registered") {
			t.Errorf("status %q: %q, want it to say the model is registered", st.Reason, st.Message)
		}
		tj := &trainer.TrainJob{}
		if err := c.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, tj); err != nil {
			t.Fatal(err)
		}
		var rm, v regEntity
		if code := registryGet(t, "/registered_model", url.Values{"name": {model}}, &rm); code != http.StatusOK {
			t.Fatalf("model %s is not in the registry (%d)", model, code)
		}
		if code := registryGet(t, "/model_version", url.Values{"name": {"v1"}, "parentResourceId": {rm.ID}}, &v); code != http.StatusOK {
			t.Fatalf("version v1 is not in the registry (%d)", code)
		}
		prop := func(k string) any { return v.CustomProperties[k]["string_value"] }
		for k, want := range map[string]string{"mpijob.namespace": ns, "mpijob.job": name, "mpijob.uid": string(tj.UID), "mpijob.creator": user, "mpijob.workers": "2"} {
			if got := prop(k); got != want {
				t.Errorf("property %s = %v, want %s", k, got, want)
			}
		}
		if v.Author != user {
			t.Errorf("author %q, want the job's creator %s (not the manager)", v.Author, user)
		}
		if _, ok := v.CustomProperties["accuracy"]["double_value"].(float64); !ok {
			t.Errorf("version v1 has no accuracy: %v", v.CustomProperties)
		}
		var arts struct{ Items []regEntity }
		registryGet(t, "/model_versions/"+v.ID+"/artifacts", nil, &arts)
		if len(arts.Items) != 1 || !strings.HasSuffix(strings.Split(arts.Items[0].URI, "?")[0], "/"+name+"/model.npz") {
			t.Errorf("artifacts %+v, want the job's model.npz", arts.Items)
		}
		c.WaitForManagerEvents(t, ns, name, []string{"ModelRegistered"}, time.Minute)
		// The user's own registration of the same is unchanged.
		expect(t, mpijob(t, user, ns, "register", name, model+":v1"), 0, "already registered from job "+name, "nothing changed")
	})

	t.Run("the registry down: Succeeded, warned, and registered later", func(t *testing.T) {
		localcluster.StopModelRegistry(opts)
		t.Cleanup(func() {
			if err := localcluster.StartModelRegistry(context.Background(), opts, io.Discard); err != nil {
				t.Errorf("the model registry did not start again: %v", err)
			}
		})
		expect(t, create(down, model+":v2", dc...), 0, "created")
		t.Cleanup(func() { mpijob(t, user, ns, "delete", down) })
		if got := c.WaitForTrainJob(t, ns, down, 8*time.Minute, trainer.TrainJobComplete, trainer.TrainJobFailed); got != trainer.TrainJobComplete {
			t.Fatalf("%s ended %s", down, got)
		}
		st := c.WaitForStatus(t, ns, down, 2*time.Minute, func(s api.Status) bool { return s.Reason == diagnose.ReasonModelRegistrationFailed })
		command := "kubectl mpijob register " + down + " " + model + ":v2"
		if st.Phase != api.PhaseSucceeded || !strings.HasPrefix(st.Message, api.ModelRegistrationFailedWarning) ||
			!strings.Contains(st.Message, "could not be reached") || !strings.Contains(st.Message, command) || !strings.Contains(st.NextStep, command) {
			t.Errorf("status %s %s: %q (next step %q), want Succeeded with the warning, what failed and %q", st.Phase, st.Reason, st.Message, st.NextStep, command)
		}
		evs := c.WaitForManagerEvents(t, ns, down, []string{"ModelRegistrationFailed"}, time.Minute)
		for _, e := range evs {
			if e.Reason == "ModelRegistrationFailed" && (e.Type != "Warning" || !strings.Contains(e.Message, command)) {
				t.Errorf("Event %s %s %q, want a Warning with %q", e.Type, e.Reason, e.Message, command)
			}
		}
		// Every interface: the CLI's get and describe, the SDK's status.
		expect(t, mpijob(t, user, ns, "get", down), 0, "Succeeded")
		expect(t, mpijob(t, user, ns, "describe", down), 0, "Training completed, but model upload failed", command)
		sdkStatus := sdkJobStatus(t, user, ns, down)
		if sdkStatus["phase"] != "Succeeded" || sdkStatus["reason"] != diagnose.ReasonModelRegistrationFailed || !strings.Contains(sdkStatus["message"], command) {
			t.Errorf("the SDK's status: %v", sdkStatus)
		}
		// The job's artifacts are there as they were.
		expect(t, mpijob(t, user, ns, "artifacts", down), 0, "model.npz")
		ts, _ := dashboardServer(t)
		browserCheck(t, "registration.mjs", ts.URL, "the registration warning on the job page", "JOB="+down, "COMMAND="+command)

		if err := localcluster.StartModelRegistry(context.Background(), opts, io.Discard); err != nil {
			t.Fatal(err)
		}
		// The command the warning gives works as it is (or finds that
		// the manager's next try, due within a minute, already did it).
		r := mpijob(t, user, ns, strings.Fields(strings.TrimPrefix(command, "kubectl mpijob "))...)
		if ok := strings.Contains(r.out, "registered version v2") || strings.Contains(r.out, "already registered"); r.code != 0 || !ok {
			t.Errorf("%s: exit %d %s %s", command, r.code, r.out, r.errOut)
		}
		st = c.WaitForStatus(t, ns, down, 3*time.Minute, func(s api.Status) bool { return s.Reason == "" && strings.Contains(s.Message, "is registered") })
		if st.Phase != api.PhaseSucceeded {
			t.Errorf("after the registry came back: %s %q", st.Phase, st.Message)
		}
	})

	t.Run("a version another job holds is said once, not retried", func(t *testing.T) {
		taken := framework.UniqueName("reg-taken")
		expect(t, create(taken, model+":v1", dc...), 0, "created")
		t.Cleanup(func() { mpijob(t, user, ns, "delete", taken) })
		if got := c.WaitForTrainJob(t, ns, taken, 8*time.Minute, trainer.TrainJobComplete, trainer.TrainJobFailed); got != trainer.TrainJobComplete {
			t.Fatalf("%s ended %s", taken, got)
		}
		st := c.WaitForStatus(t, ns, taken, 2*time.Minute, func(s api.Status) bool { return s.Reason == diagnose.ReasonModelRegistrationFailed })
		if !strings.Contains(st.Message, "exists already (registered from job "+ns+"/"+name+")") {
			t.Errorf("status %q, want it to name the job that holds v1", st.Message)
		}
		tj := &trainer.TrainJob{}
		if err := c.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: taken}, tj); err != nil {
			t.Fatal(err)
		}
		rec, err := api.ReadRegistration(tj.Annotations)
		if err != nil || rec == nil || rec.State != api.RegistrationFailed || rec.NextTry != nil {
			t.Errorf("registration %+v (%v), want Failed with no next try", rec, err)
		}
	})

	t.Run("a tenant cannot forge the manager's record", func(t *testing.T) {
		out, err := c.Kubectl(t, user, ns, "", "annotate", "trainjob", name, "--overwrite", api.ModelRegistrationAnnotation+`={"model":"x","version":"y","state":"Registered"}`)
		if err == nil || !strings.Contains(out, "only mpijob-manager") {
			t.Errorf("dev-a wrote the registration record: %v %s", err, out)
		}
	})
}

// sdkJobStatus is the SDK's view of a job's status, as user sees it.
func sdkJobStatus(t *testing.T, user, ns, name string) map[string]string {
	t.Helper()
	wd, _ := os.Getwd()
	opts, err := localcluster.DefaultOptions(wd)
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(wd, "..", "..")
	py := filepath.Join(opts.CacheDir, "sdk-venv", "bin", "python") // make test-e2e installs it
	script := `import json, sys
from mpijob import MPIJobClient
s = MPIJobClient(namespace=sys.argv[2], context=sys.argv[1], config_file=sys.argv[4]).get_job(sys.argv[3]).status
print(json.dumps({"phase": s.phase, "reason": s.reason, "message": s.message}))`
	cmd := exec.Command(py, "-c", script, user, ns, name, framework.Get(t).Kubeconfig) //nolint:gosec // the test's own script
	cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(root, "sdk", "python"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the SDK: %v: %s", err, out)
	}
	var s map[string]string
	if err := json.Unmarshal(out[strings.LastIndex(string(out[:len(out)-1]), "\n")+1:], &s); err != nil {
		t.Fatalf("the SDK printed %s: %v", out, err)
	}
	return s
}
