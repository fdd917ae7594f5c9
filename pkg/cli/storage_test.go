package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/artifacts"
	"github.com/mpijob/mpijob/pkg/dataconn"
	"github.com/mpijob/mpijob/pkg/progress"
)

func connection(name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a",
			Labels:      map[string]string{dataconn.DashboardLabel: "true"},
			Annotations: map[string]string{dataconn.ConnectionTypeAnnotation: dataconn.TypeS3}},
		Data: map[string][]byte{},
	}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

var goodKeys = map[string]string{
	dataconn.AccessKeyID: "team-a", dataconn.SecretAccessKey: "s3cr3t-value", dataconn.Endpoint: "http://10.244.0.1:9460", dataconn.Bucket: "team-a",
}

// create --data-connection checks the connection, as the user, before
// anything is created, and the job carries references, never the values.
func TestCreateWithDataConnection(t *testing.T) {
	base := shippedRuntime(t, "mpi-openmpi")
	noBucket := map[string]string{}
	for k, v := range goodKeys {
		if k != dataconn.Bucket {
			noBucket[k] = v
		}
	}
	cases := map[string]struct {
		conns   []string
		objs    []client.Object
		wantErr string
	}{
		"good":                 {conns: []string{"local-s3"}, objs: []client.Object{connection("local-s3", goodKeys)}},
		"misspelled":           {conns: []string{"local-s4"}, objs: []client.Object{connection("local-s3", goodKeys)}, wantErr: `--data-connection "local-s4": no such data connection in this namespace: list them with kubectl get secrets -l opendatahub.io/dashboard=true (did you mean local-s3?)`},
		"without a bucket key": {conns: []string{"local-s3"}, objs: []client.Object{connection("local-s3", noBucket)}, wantErr: `--data-connection "local-s3": key AWS_S3_BUCKET is missing or empty`},
		"a plain Secret": {conns: []string{"creds"}, objs: []client.Object{&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: "team-a"}}},
			wantErr: `--data-connection "creds": this Secret is not a data connection`},
		"bad name": {conns: []string{"Local_S3"}, wantErr: `--data-connection "Local_S3": is not a data connection name`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var created []string
			o, _, _ := fakeOptions(t, interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				created = append(created, obj.GetName())
				return c.Create(ctx, obj, opts...)
			}}, append(tc.objs, base)...)
			c := &createOptions{Options: o, dryRun: "none"}
			c.workers, c.runtime, c.dataConnections = 2, "mpi-openmpi", tc.conns
			set := func(n string) bool { return slices.Contains([]string{"workers", "data-connection"}, n) }
			err := c.Complete([]string{"digits"}, -1, set)
			if err == nil {
				err = c.Validate()
			}
			if err == nil {
				err = c.Run(context.Background())
			}
			if tc.wantErr != "" {
				var ee *exitError
				if !errors.As(err, &ee) || !strings.Contains(ee.msg, tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				if len(created) > 0 {
					t.Errorf("a refused job left %v behind", created)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			cl, _ := o.clients()
			rt := &trainer.TrainingRuntime{}
			if err := cl.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: "digits"}, rt); err != nil {
				t.Fatal(err)
			}
			for _, rj := range rt.Spec.Template.Spec.ReplicatedJobs {
				for _, ct := range rj.Template.Spec.Template.Spec.Containers {
					if ct.Name != api.NodeContainer {
						continue
					}
					refs := 0
					for _, e := range ct.Env {
						if e.Value != "" && strings.Contains(e.Value, "s3cr3t") {
							t.Errorf("%s of %s carries the secret's value", e.Name, rj.Name)
						}
						if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == "local-s3" {
							refs++
						}
					}
					if refs != len(dataconn.Keys) {
						t.Errorf("%s has %d references to local-s3, want %d", rj.Name, refs, len(dataconn.Keys))
					}
				}
			}
		})
	}
}

type fakeStore struct {
	objs   []artifacts.Object
	files  map[string]string
	closed bool
}

func (f *fakeStore) Location() artifacts.Location {
	return artifacts.Location{Connection: "local-s3", URI: "s3://team-a/digits/"}
}
func (f *fakeStore) Close() error { f.closed = true; return nil }

func (f *fakeStore) List(context.Context) ([]artifacts.Object, error) { return f.objs, nil }
func (f *fakeStore) Open(_ context.Context, name string) (io.ReadCloser, int64, error) {
	body, ok := f.files[name]
	if !ok {
		return nil, 0, errors.New("no such artifact")
	}
	return io.NopCloser(bytes.NewBufferString(body)), int64(len(body)), nil
}

func TestArtifactsVerb(t *testing.T) {
	when := now.Add(-time.Minute)
	st := &fakeStore{
		objs:  []artifacts.Object{{Name: "metrics.json", Size: 120, LastModified: when}, {Name: "model.npz", Size: 2048, LastModified: when}},
		files: map[string]string{"metrics.json": `{"accuracy": 0.9667}`, "model.npz": "weights"},
	}
	run := func(t *testing.T, a *artifactsOptions) error {
		t.Helper()
		a.now = func() time.Time { return now }
		a.open = func(context.Context, *clients, string, io.Writer) (artifacts.Source, error) { return st, nil }
		return a.Run(context.Background())
	}
	t.Run("lists", func(t *testing.T) {
		o, out, _ := fakeOptions(t, interceptor.Funcs{})
		if err := run(t, &artifactsOptions{Options: o, name: "digits"}); err != nil {
			t.Fatal(err)
		}
		for _, w := range []string{"NAME", "metrics.json", "120 B", "model.npz", "2.0 KiB", "60s"} {
			if !strings.Contains(out.String(), w) {
				t.Errorf("output lacks %q:\n%s", w, out)
			}
		}
		if !st.closed {
			t.Error("the store was not closed (a PVC's reader pod would be left behind)")
		}
	})
	t.Run("downloads one file", func(t *testing.T) {
		dir := t.TempDir()
		o, out, _ := fakeOptions(t, interceptor.Funcs{})
		if err := run(t, &artifactsOptions{Options: o, name: "digits", download: dir, only: []string{"metrics.json"}}); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, "metrics.json"))
		if err != nil || string(b) != `{"accuracy": 0.9667}` {
			t.Errorf("metrics.json = %q, %v", b, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "model.npz")); err == nil {
			t.Error("--file metrics.json downloaded model.npz too")
		}
		if !strings.Contains(out.String(), "[1/1] metrics.json") {
			t.Errorf("no progress line: %s", out)
		}
	})
	t.Run("names the job chose that would land outside the folder are skipped, the rest downloaded", func(t *testing.T) {
		root := t.TempDir()
		dir := filepath.Join(root, "into", "here")
		evil := &fakeStore{
			objs:  []artifacts.Object{{Name: "../../x", Size: 4}, {Name: "/tmp/abs", Size: 4}, {Name: "ok/model.pt", Size: 4}, {Name: "bell\a", Size: 4}},
			files: map[string]string{"../../x": "evil", "/tmp/abs": "evil", "ok/model.pt": "good", "bell\a": "ring"},
		}
		o, out, errOut := fakeOptions(t, interceptor.Funcs{})
		a := &artifactsOptions{Options: o, name: "digits", download: dir, now: func() time.Time { return now }}
		a.open = func(context.Context, *clients, string, io.Writer) (artifacts.Source, error) { return evil, nil }
		if err := a.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "ok", "model.pt")); err != nil || string(b) != "good" {
			t.Errorf("ok/model.pt = %q, %v", b, err)
		}
		if _, err := os.Stat(filepath.Join(root, "x")); err == nil {
			t.Error("../../x was written outside the download folder")
		}
		for _, w := range []string{`skipped "../../x": the name climbs out of the job's folder (..)`, `skipped "/tmp/abs": the name starts at the root`, `skipped "bell\a": the name has the control character U+0007`} {
			if !strings.Contains(errOut.String(), w) {
				t.Errorf("stderr lacks %q:\n%s\nstdout:\n%s", w, errOut, out)
			}
		}
	})
	t.Run("a file that is not there", func(t *testing.T) {
		o, _, _ := fakeOptions(t, interceptor.Funcs{})
		err := run(t, &artifactsOptions{Options: o, name: "digits", download: t.TempDir(), only: []string{"model.pt"}})
		var ee *exitError
		if !errors.As(err, &ee) || !strings.Contains(ee.msg, "--file model.pt: s3://team-a/digits/ has no such artifact; it has metrics.json, model.npz") {
			t.Errorf("error %v", err)
		}
	})
	t.Run("a job without a data connection", func(t *testing.T) {
		o, _, _ := fakeOptions(t, interceptor.Funcs{}, fakeJob("hello"))
		a := &artifactsOptions{Options: o, name: "hello", open: openStore}
		err := a.Run(context.Background())
		var ee *exitError
		if !errors.As(err, &ee) || !strings.Contains(ee.msg, "MPI job hello has no data connection or PVC") {
			t.Errorf("error %v", err)
		}
	})
}

// The PROGRESS column shows only when a job reports progress.
func TestProgressColumn(t *testing.T) {
	a := testJob("team-a", "a", "mpi-openmpi", 2, &api.Status{Phase: api.PhaseRunning}, time.Minute)
	b := testJob("team-a", "b", "mpi-openmpi", 2, &api.Status{Phase: api.PhaseRunning}, time.Minute)
	if got := JobTable([]trainer.TrainJob{a, b}, now); slices.ContainsFunc(got.ColumnDefinitions, func(c metav1.TableColumnDefinition) bool { return c.Name == "Progress" }) {
		t.Errorf("jobs without progress got a Progress column")
	}
	b.Annotations[progress.Annotation] = `{"progressPercentage": 45, "currentEpoch": 9, "totalEpochs": 20}`
	got := JobTable([]trainer.TrainJob{a, b}, now)
	if got.ColumnDefinitions[progressColumn].Name != "Progress" {
		t.Fatalf("columns %v", got.ColumnDefinitions)
	}
	if got.Rows[0].Cells[progressColumn] != "-" || got.Rows[1].Cells[progressColumn] != "45% epoch 9/20" {
		t.Errorf("cells %v / %v", got.Rows[0].Cells, got.Rows[1].Cells)
	}
}
