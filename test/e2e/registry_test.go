//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/mpijob/mpijob/pkg/dataconn"
	"github.com/mpijob/mpijob/pkg/localcluster"
	"github.com/mpijob/mpijob/pkg/registry"
	"github.com/mpijob/mpijob/test/framework"
)

// registryGet reads the local registry's REST API directly (on loopback,
// behind its gateway), as its administrator would.
func registryGet(t *testing.T, path string, query url.Values, out any) int {
	t.Helper()
	u := fmt.Sprintf("http://127.0.0.1:9467%s%s", registry.APIPath, path)
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	resp, err := http.Get(u) //nolint:gosec,noctx // the test's own loopback registry
	if err != nil {
		t.Fatalf("the registry: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK && out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: %v: %s", u, err, b)
		}
	}
	return resp.StatusCode
}

type regEntity struct {
	ID                 string                    `json:"id"`
	Name               string                    `json:"name"`
	URI                string                    `json:"uri"`
	ModelFormatName    string                    `json:"modelFormatName"`
	Author             string                    `json:"author"`
	CustomProperties   map[string]map[string]any `json:"customProperties"`
	RegisteredModelID  string                    `json:"registeredModelId"`
	ArtifactType       string                    `json:"artifactType"`
	ModelFormatVersion string                    `json:"modelFormatVersion"`
}

// startRegistry starts the local cluster's model registry unless it runs,
// and returns the cluster's options (to stop and start it again).
func startRegistry(t *testing.T) localcluster.Options {
	t.Helper()
	wd, _ := os.Getwd()
	opts, err := localcluster.DefaultOptions(wd)
	if err != nil {
		t.Fatal(err)
	}
	if err := localcluster.StartModelRegistry(context.Background(), opts, io.Discard); err != nil {
		t.Fatalf("the model registry: %v", err)
	}
	return opts
}

// tokenOf is a kubeconfig user's bearer token.
func tokenOf(t *testing.T, c *framework.Cluster, user string) string {
	t.Helper()
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(&clientcmd.ClientConfigLoadingRules{ExplicitPath: c.Kubeconfig},
		&clientcmd.ConfigOverrides{CurrentContext: user}).ClientConfig()
	if err != nil || cfg.BearerToken == "" {
		t.Fatalf("the token of %s: %v", user, err)
	}
	return cfg.BearerToken
}

// A succeeded job's model is registered in the real registry as its user:
// the artifact's URI in OpenShift AI's form (which reads the model back),
// its format, the job's metrics and provenance. The same registration
// again changes nothing; a typo, a taken version, a registry that is down
// and another tenant are each told what to do, and nothing is lost.
func TestRegisterModel(t *testing.T) {
	t.Parallel()
	framework.HeavyCPU(t)
	c := framework.Get(t)
	const ns, user = "team-a", "dev-a"
	opts := startRegistry(t)
	name := framework.UniqueName("reg")
	model := framework.UniqueName("digits-classifier")
	expect(t, mpijob(t, user, ns, append([]string{"create", name, "--workers", "2", "--slots-per-worker", "1", "--data-connection", localcluster.DataConnectionName},
		digitsCommand("--epochs", "3", "--output", "from-env")...)...), 0, "created")
	t.Cleanup(func() { mpijob(t, user, ns, "delete", name) })
	// Before it succeeded: said, nothing registered.
	expect(t, mpijob(t, user, ns, "register", name, model+":v1"), 2, "a model is registered from a job that succeeded", "kubectl mpijob wait "+name)
	if got := c.WaitForTrainJob(t, ns, name, 8*time.Minute, trainer.TrainJobComplete, trainer.TrainJobFailed); got != trainer.TrainJobComplete {
		t.Fatalf("%s ended %s", name, got)
	}
	st := finalProgress(t, c, ns, name)

	t.Run("bad input names the field, the value and the fix", func(t *testing.T) {
		expect(t, mpijob(t, user, ns, "register", name, "digits classifier:v1"), 2, `NAME[:VERSION] (model name) "digits classifier"`, "e.g. digits-classifier")
		expect(t, mpijob(t, user, ns, "register", name, model+":"), 2, `(version) ""`)
		expect(t, mpijob(t, user, ns, "register", name, model+":v1", "--artifact", "model.onnx"), 2, `--artifact "model.onnx"`, "model.npz")
		expect(t, mpijob(t, user, ns, "register", name, model+":v1", "--registry", "nowhere"), 2, `--registry "nowhere"`, "NAMESPACE/SERVICE")
		expect(t, mpijob(t, user, ns, "register", name, model+":v1", "--registry", "team-a/none"), 2, "no model registry Service none")
		if code := registryGet(t, "/registered_model", url.Values{"name": {model}}, nil); code != http.StatusNotFound {
			t.Errorf("bad input registered model %s (GET answered %d)", model, code)
		}
	})

	var version regEntity
	t.Run("registered with its URI, format, metrics and provenance", func(t *testing.T) {
		expect(t, mpijob(t, user, ns, "register", name, model+":v1", "--new-model"), 0, "registered new model, version v1 of "+model)
		var rm regEntity
		if code := registryGet(t, "/registered_model", url.Values{"name": {model}}, &rm); code != http.StatusOK {
			t.Fatalf("model %s is not in the registry (%d)", model, code)
		}
		if code := registryGet(t, "/model_version", url.Values{"name": {"v1"}, "parentResourceId": {rm.ID}}, &version); code != http.StatusOK {
			t.Fatalf("version v1 of %s is not in the registry (%d)", model, code)
		}
		prop := func(k string) any { return version.CustomProperties[k]["string_value"] }
		for k, want := range map[string]string{"mpijob.namespace": ns, "mpijob.job": name, "mpijob.runtime": "mpi-openmpi", "mpijob.workers": "2", "mpijob.creator": user} {
			if got := prop(k); got != want {
				t.Errorf("property %s = %v, want %s", k, got, want)
			}
		}
		if img, _ := prop("mpijob.image").(string); !strings.Contains(img, "openmpi") {
			t.Errorf("property mpijob.image = %q, want the Workers' OpenMPI image", img)
		}
		if got := version.CustomProperties["accuracy"]["double_value"]; got != st.TrainMetrics["accuracy"] {
			t.Errorf("accuracy %v, want the job's %v", got, st.TrainMetrics["accuracy"])
		}
		if got := version.CustomProperties["loss"]["double_value"]; got != st.TrainMetrics["loss"] {
			t.Errorf("loss %v, want the job's %v", got, st.TrainMetrics["loss"])
		}
		if version.Author != user {
			t.Errorf("author %q, want %s", version.Author, user)
		}
		var arts struct{ Items []regEntity }
		registryGet(t, "/model_versions/"+version.ID+"/artifacts", nil, &arts)
		if len(arts.Items) != 1 || arts.Items[0].ArtifactType != "model-artifact" || arts.Items[0].ModelFormatName != "numpy" {
			t.Fatalf("artifacts of v1 = %+v, want one numpy model-artifact", arts.Items)
		}
		// The URI reads the model back, as OpenShift AI's dashboard does.
		u, err := url.Parse(arts.Items[0].URI)
		if err != nil || u.Scheme != "s3" || u.Query().Get("endpoint") != localcluster.S3Endpoint || u.Query().Get("defaultRegion") != localcluster.S3Region {
			t.Fatalf("URI %s, want s3://BUCKET/KEY?endpoint=%s&defaultRegion=%s", arts.Items[0].URI, localcluster.S3Endpoint, localcluster.S3Region)
		}
		keys := connectionOf(t, ns)
		ep, _ := url.Parse(u.Query().Get("endpoint"))
		mc, err := minio.New(ep.Host, &minio.Options{Creds: credentials.NewStaticV4(keys[dataconn.AccessKeyID], keys[dataconn.SecretAccessKey], ""), Region: u.Query().Get("defaultRegion")})
		if err != nil {
			t.Fatal(err)
		}
		obj, err := mc.GetObject(context.Background(), u.Host, strings.TrimPrefix(u.Path, "/"), minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(obj)
		if err != nil || !bytes.HasPrefix(b, []byte("PK")) {
			t.Errorf("the URI's object is not the model (an .npz archive): %d bytes, %v", len(b), err)
		}
	})

	t.Run("the same registration again changes nothing", func(t *testing.T) {
		expect(t, mpijob(t, user, ns, "register", name, model+":v1"), 0, "already registered from job "+name, "nothing changed")
		var arts struct{ Items []regEntity }
		registryGet(t, "/model_versions/"+version.ID+"/artifacts", nil, &arts)
		if len(arts.Items) != 1 {
			t.Errorf("v1 has %d artifacts after the second registration, want 1", len(arts.Items))
		}
	})

	t.Run("a typo in the model name is caught", func(t *testing.T) {
		typo := strings.Replace(model, "classifier", "clasifier", 1)
		expect(t, mpijob(t, user, ns, "register", name, typo+":v2"), 2, "did you mean kubectl mpijob register "+name+" "+model+":v2", "--new-model")
		if code := registryGet(t, "/registered_model", url.Values{"name": {typo}}, nil); code != http.StatusNotFound {
			t.Errorf("the typo created model %s", typo)
		}
	})

	t.Run("another tenant cannot register or write through mpijob", func(t *testing.T) {
		r := mpijob(t, "dev-b", ns, "register", name, model+":v3")
		if r.code == 0 || !strings.Contains(r.errOut, "forbidden") {
			t.Errorf("dev-b registered team-a's job: exit %d %s", r.code, r.errOut)
		}
		// The registry's own access rules: viewer-a reads, does not write.
		for method, want := range map[string]int{http.MethodGet: http.StatusOK, http.MethodPost: http.StatusForbidden} {
			req, _ := http.NewRequestWithContext(context.Background(), method, localcluster.RegistryURL+registry.APIPath+"/registered_models", strings.NewReader(`{"name":"`+model+`-viewer"}`))
			req.Header.Set("Authorization", "Bearer "+tokenOf(t, c, "viewer-a"))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("viewer-a %s registered_models: %d, want %d", method, resp.StatusCode, want)
			}
		}
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, localcluster.RegistryURL+registry.APIPath+"/registered_models", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("a call without a token: %d, want 401", resp.StatusCode)
		}
	})

	t.Run("the dashboard registers too", func(t *testing.T) {
		ts, _ := dashboardServer(t)
		browserCheck(t, "register.mjs", ts.URL, "Register on the Artifacts tab", "JOB="+name, "MODEL="+model)
		var rm regEntity
		registryGet(t, "/registered_model", url.Values{"name": {model}}, &rm)
		var v regEntity
		if code := registryGet(t, "/model_version", url.Values{"name": {"ui-1"}, "parentResourceId": {rm.ID}}, &v); code != http.StatusOK || v.Author != user {
			t.Errorf("the dashboard's version ui-1: %d, author %q; want it registered by %s", code, v.Author, user)
		}
	})

	t.Run("a version another job registered is not taken over", func(t *testing.T) {
		other := framework.UniqueName("reg-b")
		expect(t, mpijob(t, "dev-b", "team-b", append([]string{"create", other, "--workers", "2", "--slots-per-worker", "1", "--data-connection", localcluster.DataConnectionName},
			digitsCommand("--epochs", "2", "--output", "from-env")...)...), 0, "created")
		t.Cleanup(func() { mpijob(t, "dev-b", "team-b", "delete", other) })
		if got := c.WaitForTrainJob(t, "team-b", other, 8*time.Minute, trainer.TrainJobComplete, trainer.TrainJobFailed); got != trainer.TrainJobComplete {
			t.Fatalf("%s ended %s", other, got)
		}
		expect(t, mpijob(t, "dev-b", "team-b", "register", other, model+":v1"), 2, "version v1 of model "+model+" exists already (registered from job team-a/"+name+")")
		expect(t, mpijob(t, "dev-b", "team-b", "register", other, model+":team-b-1"), 0, "registered version team-b-1 of "+model)
	})

	t.Run("the registry down: said, with the command that registers it later", func(t *testing.T) {
		localcluster.StopModelRegistry(opts)
		t.Cleanup(func() {
			if err := localcluster.StartModelRegistry(context.Background(), opts, io.Discard); err != nil {
				t.Errorf("the model registry did not start again: %v", err)
			}
		})
		r := mpijob(t, user, ns, "register", name, model+":v2")
		expect(t, r, 1, "the model registry", "could not be reached", "The job and its artifacts are unchanged", "kubectl mpijob register "+name+" "+model+":v2")
		expect(t, mpijob(t, user, ns, "get", name), 0, "Succeeded")
		if err := localcluster.StartModelRegistry(context.Background(), opts, io.Discard); err != nil {
			t.Fatal(err)
		}
		expect(t, mpijob(t, user, ns, "register", name, model+":v2"), 0, "registered version v2 of "+model)
	})
}
