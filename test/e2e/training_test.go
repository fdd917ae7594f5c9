//go:build e2e

package e2e

import (
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/artifacts"
	"github.com/mpijob/mpijob/pkg/dataconn"
	"github.com/mpijob/mpijob/pkg/localcluster"
	"github.com/mpijob/mpijob/pkg/progress"
	"github.com/mpijob/mpijob/test/framework"
)

var accuracyLine = regexp.MustCompile(`test accuracy (\d\.\d+) on (\d+) digits after (\d+) epochs, (\d+) ranks, ([\d.]+)s`)

// finalAccuracy reads the reference workloads' last line from a job's
// Launcher log: the accuracy and the training time the job measured.
func finalAccuracy(t *testing.T, user, ns, name string) (acc float64, ranks int, seconds float64) {
	t.Helper()
	r := mpijob(t, user, ns, "logs", name)
	m := accuracyLine.FindAllStringSubmatch(r.out, -1)
	if len(m) == 0 {
		t.Fatalf("the Launcher's log of %s has no final accuracy line:\n%s", name, r.out)
	}
	last := m[len(m)-1]
	acc, _ = strconv.ParseFloat(last[1], 64)
	ranks, _ = strconv.Atoi(last[4])
	seconds, _ = strconv.ParseFloat(last[5], 64)
	return acc, ranks, seconds
}

// waitForTrainJobs waits for the TrainJobs side by side until each is
// Complete or Failed (or timeout passes), and returns how each ended, in
// the order of names.
func waitForTrainJobs(t *testing.T, c *framework.Cluster, ns string, timeout time.Duration, names ...string) []string {
	t.Helper()
	var wg sync.WaitGroup
	ended := make([]string, len(names))
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ended[i] = c.WaitForTrainJob(t, ns, name, timeout, trainer.TrainJobComplete, trainer.TrainJobFailed)
		}()
	}
	wg.Wait()
	return ended
}

// finalProgress waits up to 90 s for the 100 % progress that the manager
// publishes on a finished job's TrainJob, and returns it.
func finalProgress(t *testing.T, c *framework.Cluster, ns, name string) progress.TrainerStatus {
	t.Helper()
	var st progress.TrainerStatus
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		tj := &trainer.TrainJob{}
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, tj); err != nil {
			return false, nil //nolint:nilerr // keep polling
		}
		s, ok := progress.Read(tj.Annotations)
		st = s
		return ok && s.ProgressPercentage != nil && *s.ProgressPercentage == 100, nil
	})
	if err != nil {
		t.Fatalf("no final progress on the TrainJob %s (%s) within 90 s; last %+v", name, progress.Annotation, st)
	}
	return st
}

// connectionOf reads the keys of the namespace's local-s3 data connection
// (as the admin: for checks made outside the product).
func connectionOf(t *testing.T, ns string) map[string]string {
	t.Helper()
	name := localcluster.DataConnectionName
	s := &corev1.Secret{}
	if err := framework.Get(t).Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		t.Fatalf("data connection %s/%s: %v", ns, name, err)
	}
	out := map[string]string{}
	for k, v := range s.Data {
		out[k] = string(v)
	}
	return out
}

func s3Client(t *testing.T, keys map[string]string) *minio.Client {
	t.Helper()
	mc, err := minio.New(strings.TrimPrefix(keys[dataconn.Endpoint], "http://"), &minio.Options{
		Creds: credentials.NewStaticV4(keys[dataconn.AccessKeyID], keys[dataconn.SecretAccessKey], ""), Region: keys[dataconn.Region],
	})
	if err != nil {
		t.Fatal(err)
	}
	return mc
}

// The whole journey on the real cluster and its real S3 store: the data
// comes from the tenant's bucket through its data connection, the job
// learns, reports progress the manager publishes, writes the model to the
// bucket under the job's name, and the model downloaded with `kubectl
// mpijob artifacts` scores the same outside the job.
func TestDigitsFromS3ToModel(t *testing.T) {
	t.Parallel()
	framework.HeavyCPU(t)
	c := framework.Get(t)
	const ns, user = "team-a", "dev-a"
	keys := connectionOf(t, ns)
	name := framework.UniqueName("digits")
	r := mpijob(t, user, ns, "create", name, "--workers", "2", "--slots-per-worker", "2", "--data-connection", localcluster.DataConnectionName, "--",
		"mpirun", "python3", "/opt/mpijob/examples/digits_mpi4py.py",
		"--data", "s3://$(AWS_S3_BUCKET)/"+localcluster.DigitsDatasetKey, "--output", "from-env", "--min-accuracy", "0.95")
	expect(t, r, 0, "mpijob "+name+" created")
	t.Cleanup(func() { mpijob(t, user, ns, "delete", name) })
	c.WaitForTrainJob(t, ns, name, 8*time.Minute, trainer.TrainJobComplete, trainer.TrainJobFailed)
	acc, ranks, _ := finalAccuracy(t, user, ns, name)
	if acc < 0.95 || ranks != 4 {
		t.Fatalf("accuracy %.4f on %d ranks, want >= 0.95 on 4", acc, ranks)
	}

	t.Run("progress is published and shown", func(t *testing.T) {
		st := finalProgress(t, c, ns, name)
		if st.TotalEpochs == nil || *st.TotalEpochs != 30 || st.TrainMetrics["accuracy"] < 0.95 || st.TrainMetrics["loss"] <= 0 {
			t.Errorf("progress %+v: want 30 epochs, accuracy >= 0.95 and a loss", st)
		}
		expect(t, mpijob(t, user, ns, "get", name), 0, "PROGRESS", "100% epoch 30/30")
		expect(t, mpijob(t, user, ns, "describe", name), 0, "Progress:", "Metrics:", "loss", "Data connections:", localcluster.DataConnectionName)
	})

	t.Run("no interface prints the connection's secret", func(t *testing.T) {
		secret := keys[dataconn.SecretAccessKey]
		for _, args := range [][]string{{"get", name, "-o", "yaml"}, {"describe", name}, {"logs", name, "--all"}, {"events", name}} {
			if r := mpijob(t, user, ns, args...); strings.Contains(r.out+r.errOut, secret) {
				t.Errorf("kubectl mpijob %s printed the secret access key", strings.Join(args, " "))
			}
		}
		rt := &trainer.TrainingRuntime{}
		if err := c.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, rt); err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(rt)
		if strings.Contains(string(raw), secret) {
			t.Error("the job's runtime holds the secret access key")
		}
		if !strings.Contains(string(raw), `"secretKeyRef":{"name":"local-s3","key":"AWS_SECRET_ACCESS_KEY"}`) {
			t.Errorf("the job's runtime has no reference to the connection's key:\n%s", raw)
		}
	})

	t.Run("the model scores the same outside the job", func(t *testing.T) {
		expect(t, mpijob(t, user, ns, "artifacts", name), 0, "model.npz", "metrics.json")
		dir := t.TempDir()
		expect(t, mpijob(t, user, ns, "artifacts", name, "--download", dir), 0, "[2/2]")
		var metrics struct {
			Accuracy    float64 `json:"accuracy"`
			TestIndices []int   `json:"test_indices"`
		}
		b, err := os.ReadFile(filepath.Join(dir, "metrics.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &metrics); err != nil || len(metrics.TestIndices) != 360 {
			t.Fatalf("metrics.json: %v, %d test indices\n%s", err, len(metrics.TestIndices), b)
		}
		model := readNPZ(t, filepath.Join(dir, "model.npz"))
		x, y := readDigits(t, s3Client(t, keys), keys[dataconn.Bucket])
		got := score(t, model, x, y, metrics.TestIndices)
		t.Logf("accuracy in the job %.4f, scored again here %.4f", metrics.Accuracy, got)
		if math.Abs(got-metrics.Accuracy) > 0.5/360 || math.Abs(got-acc) > 0.5/360+1e-4 {
			t.Errorf("the downloaded model scores %.4f here, the job said %.4f (log %.4f)", got, metrics.Accuracy, acc)
		}
	})

	t.Run("the dashboard shows it", func(t *testing.T) {
		ts, _ := dashboardServer(t)
		browserCheck(t, "training.mjs", ts.URL, "Training and Artifacts tab checks", "JOB="+name)
	})

	t.Run("another tenant reads none of it", func(t *testing.T) {
		if r := mpijob(t, "dev-b", ns, "artifacts", name); r.code == 0 {
			t.Errorf("dev-b listed team-a's artifacts:\n%s", r.out)
		}
		if r := mpijob(t, "viewer-a", ns, "artifacts", name); r.code == 0 || !strings.Contains(r.out+r.errOut, "may not read data connection") {
			t.Errorf("viewer-a, who cannot read Secrets, listed the artifacts (exit %d):\n%s%s", r.code, r.out, r.errOut)
		}
		other := connectionOf(t, "team-b")
		mc := s3Client(t, other)
		for o := range mc.ListObjects(context.Background(), keys[dataconn.Bucket], minio.ListObjectsOptions{Prefix: name + "/"}) {
			if o.Err == nil {
				t.Errorf("team-b's keys list %s in team-a's bucket", o.Key)
			}
		}
		if _, err := mc.StatObject(context.Background(), keys[dataconn.Bucket], name+"/model.npz", minio.StatObjectOptions{}); err == nil {
			t.Error("team-b's keys read team-a's model")
		}
	})
}

// Bad data connections: a misspelled name and a missing key are refused
// before anything is created; a wrong bucket fails the job with a message
// naming the connection and the key to fix.
func TestDataConnectionMistakes(t *testing.T) {
	t.Parallel()
	c := framework.Get(t)
	const ns, user = "team-a", "dev-a"
	name := framework.UniqueName("dc")
	noRuntime := func(t *testing.T) {
		t.Helper()
		err := c.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &trainer.TrainingRuntime{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("a refused job left its runtime behind (%v)", err)
		}
	}
	t.Run("misspelled", func(t *testing.T) {
		expect(t, mpijob(t, user, ns, "create", name, "--workers", "1", "--data-connection", "local-s4"), 2,
			`--data-connection "local-s4": no such data connection`, "did you mean local-s3?")
		noRuntime(t)
	})
	keys := connectionOf(t, ns)
	mk := func(t *testing.T, conn string, data map[string]string) {
		t.Helper()
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: conn, Namespace: ns,
			Labels:      map[string]string{dataconn.DashboardLabel: "true"},
			Annotations: map[string]string{dataconn.ConnectionTypeAnnotation: dataconn.TypeS3}}, StringData: data}
		// As the tenant: an editor creates connections in the namespace.
		if err := c.As(t, user).Create(context.Background(), s); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Client.Delete(context.Background(), s) })
	}
	t.Run("without a bucket", func(t *testing.T) {
		conn := framework.UniqueName("no-bucket")
		data := map[string]string{}
		for k, v := range keys {
			if k != dataconn.Bucket {
				data[k] = v
			}
		}
		mk(t, conn, data)
		expect(t, mpijob(t, user, ns, "create", name, "--workers", "1", "--data-connection", conn), 2,
			fmt.Sprintf(`--data-connection %q: key AWS_S3_BUCKET is missing or empty`, conn))
		noRuntime(t)
	})
	t.Run("a bucket that does not exist", func(t *testing.T) {
		conn := framework.UniqueName("wrong-bucket")
		data := map[string]string{}
		for k, v := range keys {
			data[k] = v
		}
		data[dataconn.Bucket] = "no-such-bucket-" + strings.ToLower(conn[len(conn)-5:])
		mk(t, conn, data)
		expect(t, mpijob(t, user, ns, "create", name, "--workers", "1", "--data-connection", conn, "--",
			"mpirun", "python3", "/opt/mpijob/examples/digits_mpi4py.py", "--data", "s3://$(AWS_S3_BUCKET)/"+localcluster.DigitsDatasetKey), 0)
		t.Cleanup(func() { mpijob(t, user, ns, "delete", name) })
		c.WaitForTrainJob(t, ns, name, 5*time.Minute, trainer.TrainJobFailed, trainer.TrainJobComplete)
		r := mpijob(t, user, ns, "logs", name)
		for _, want := range []string{"data connection " + conn, "AWS_S3_BUCKET"} {
			if !strings.Contains(r.out, want) {
				t.Errorf("the failed job's log does not say %q:\n%s", want, r.out)
			}
		}
		// The diagnosis quotes the program's error: the connection and the key.
		st := c.WaitForStatus(t, ns, name, time.Minute, func(s api.Status) bool { return s.Phase == api.PhaseFailed })
		if !strings.Contains(st.Message, conn) || !strings.Contains(st.Message, "AWS_S3_BUCKET") {
			t.Errorf("the diagnosis does not name the connection and the key: %q", st.Message)
		}
	})
}

// A fixed seed gives the same accuracy on 1, 2 and 4 ranks (the global
// batch is split over the ranks and the gradients summed), and the
// PyTorch workload learns on 2 Workers x 2 slots. The times are logged
// for docs/training.md; 2 cores cannot show a speed-up.
func TestSameAccuracyOnOneTwoFourRanks(t *testing.T) {
	t.Parallel()
	framework.HeavyCPU(t)
	c := framework.Get(t)
	ns := c.NewNamespace(t, "ranks")
	type run struct {
		name, script   string
		workers, slots int
	}
	runs := []run{
		{"r1", "digits_mpi4py.py", 1, 1}, {"r2", "digits_mpi4py.py", 1, 2}, {"r4", "digits_mpi4py.py", 2, 2},
		{"torch4", "digits_torch.py", 2, 2},
	}
	var names []string
	for _, r := range runs {
		names = append(names, r.name)
		expect(t, mpijob(t, "admin", ns, "create", r.name, "--workers", strconv.Itoa(r.workers), "--slots-per-worker", strconv.Itoa(r.slots), "--memory", "2Gi", "--",
			"mpirun", "python3", "/opt/mpijob/examples/"+r.script, "--seed", "7", "--epochs", "30"), 0)
	}
	waitForTrainJobs(t, c, ns, 10*time.Minute, names...)
	accs := map[string]float64{}
	for _, r := range runs {
		acc, ranks, secs := finalAccuracy(t, "admin", ns, r.name)
		t.Logf("%-16s %d ranks: accuracy %.4f in %.1f s", r.script, ranks, acc, secs)
		if ranks != r.workers*r.slots {
			t.Errorf("%s ran on %d ranks, want %d", r.name, ranks, r.workers*r.slots)
		}
		accs[r.name] = acc
	}
	lo, hi := math.Min(accs["r1"], math.Min(accs["r2"], accs["r4"])), math.Max(accs["r1"], math.Max(accs["r2"], accs["r4"]))
	if hi-lo > 0.01 {
		t.Errorf("accuracies on 1, 2 and 4 ranks differ by %.4f (> 0.01): %v", hi-lo, accs)
	}
	if accs["torch4"] < 0.95 {
		t.Errorf("PyTorch data-parallel on 2 x 2 reached %.4f, want >= 0.95", accs["torch4"])
	}
}

// readNPZ reads a NumPy .npz of little-endian float64 arrays.
func readNPZ(t *testing.T, path string) map[string][]float64 {
	t.Helper()
	zr, err := zip.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = zr.Close() }()
	out := map[string][]float64{}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		_ = rc.Close()
		if err != nil || len(b) < 10 || string(b[1:6]) != "NUMPY" {
			t.Fatalf("%s in %s is not a .npy array", f.Name, path)
		}
		var hlen, start int
		if b[6] == 1 {
			hlen, start = int(binary.LittleEndian.Uint16(b[8:10])), 10
		} else {
			hlen, start = int(binary.LittleEndian.Uint32(b[8:12])), 12
		}
		header := string(b[start : start+hlen])
		if !strings.Contains(header, "'<f8'") || strings.Contains(header, "'fortran_order': True") {
			t.Fatalf("%s: want C-order float64, header %s", f.Name, header)
		}
		data := b[start+hlen:]
		vals := make([]float64, len(data)/8)
		for i := range vals {
			vals[i] = math.Float64frombits(binary.LittleEndian.Uint64(data[i*8:]))
		}
		out[strings.TrimSuffix(f.Name, ".npy")] = vals
	}
	return out
}

// readDigits reads scikit-learn's digits.csv.gz from the tenant's bucket.
func readDigits(t *testing.T, mc *minio.Client, bucket string) ([][]float64, []int) {
	t.Helper()
	obj, err := mc.GetObject(context.Background(), bucket, localcluster.DigitsDatasetKey, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = obj.Close() }()
	gz, err := gzip.NewReader(obj)
	if err != nil {
		t.Fatal(err)
	}
	var x [][]float64
	var y []int
	sc := bufio.NewScanner(gz)
	for sc.Scan() {
		f := strings.Split(strings.TrimSpace(sc.Text()), ",")
		if len(f) != 65 {
			continue
		}
		row := make([]float64, 64)
		for i := range row {
			v, _ := strconv.ParseFloat(f[i], 64)
			row[i] = v / 16
		}
		label, _ := strconv.ParseFloat(f[64], 64)
		x, y = append(x, row), append(y, int(label))
	}
	if len(x) != 1797 {
		t.Fatalf("digits.csv.gz has %d rows, want 1797", len(x))
	}
	return x, y
}

// score is the two-layer network's accuracy on the test rows: ReLU, then
// the largest logit.
func score(t *testing.T, m map[string][]float64, x [][]float64, y []int, test []int) float64 {
	t.Helper()
	w1, b1, w2, b2 := m["w1"], m["b1"], m["w2"], m["b2"]
	hidden := len(b1)
	if len(w1) != 64*hidden || len(w2) != hidden*10 || len(b2) != 10 {
		t.Fatalf("model shapes: w1 %d, b1 %d, w2 %d, b2 %d", len(w1), len(b1), len(w2), len(b2))
	}
	right := 0
	h := make([]float64, hidden)
	for _, i := range test {
		for j := 0; j < hidden; j++ {
			s := b1[j]
			for k := 0; k < 64; k++ {
				s += x[i][k] * w1[k*hidden+j]
			}
			h[j] = math.Max(s, 0)
		}
		best, arg := math.Inf(-1), -1
		for c := 0; c < 10; c++ {
			s := b2[c]
			for j := 0; j < hidden; j++ {
				s += h[j] * w2[j*10+c]
			}
			if s > best {
				best, arg = s, c
			}
		}
		if arg == y[i] {
			right++
		}
	}
	return float64(right) / float64(len(test))
}

// The same script, the same seed, the same data connection: the same
// accuracy whether the job comes from the CLI, a YAML file, the dashboard's
// API (the wizard's) or the Python SDK.
func TestSameAccuracyFromEveryInterface(t *testing.T) {
	t.Parallel()
	framework.HeavyCPU(t)
	c := framework.Get(t)
	const ns, user = "team-a", "dev-a"
	cmdline := []string{"mpirun", "python3", "/opt/mpijob/examples/digits_mpi4py.py",
		"--data", "s3://$(AWS_S3_BUCKET)/" + localcluster.DigitsDatasetKey, "--seed", "3", "--epochs", "20"}
	names := map[string]string{}
	for _, via := range []string{"cli", "yaml", "dashboard", "sdk"} {
		names[via] = framework.UniqueName("same-" + via)
	}
	t.Cleanup(func() {
		for _, n := range names {
			mpijob(t, user, ns, "delete", n, "--wait=false")
		}
	})
	expect(t, mpijob(t, user, ns, append([]string{"create", names["cli"], "--workers", "1", "--data-connection", localcluster.DataConnectionName, "--"}, cmdline...)...), 0)

	r := mpijob(t, user, ns, append([]string{"create", names["yaml"], "--workers", "1", "--data-connection", localcluster.DataConnectionName, "--dry-run=client", "-o", "yaml", "--"}, cmdline...)...)
	expect(t, r, 0)
	file := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(file, []byte(r.out), 0o644); err != nil {
		t.Fatal(err)
	}
	expect(t, mpijob(t, user, ns, "create", "-f", file), 0)

	ts, tokens := dashboardServer(t)
	body, err := json.Marshal(map[string]any{"name": names["dashboard"], "runtime": "mpi-openmpi", "workers": 1,
		"command": cmdline, "data_connections": []string{localcluster.DataConnectionName}})
	if err != nil {
		t.Fatal(err)
	}
	if res := do(t, http.MethodPost, ts.URL+"/api/jobs/"+ns, tokens[user], bytes.NewReader(body)); res.code != http.StatusCreated {
		t.Fatalf("the dashboard refused the job: %d %s", res.code, res.body)
	}

	wd, _ := os.Getwd()
	opts, err := localcluster.DefaultOptions(wd)
	if err != nil {
		t.Fatal(err)
	}
	py := filepath.Join(opts.CacheDir, "sdk-venv", "bin", "python")
	script := `import json, sys
from mpijob import MPIJobClient
name, kubeconfig, command = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
MPIJobClient(namespace="team-a", context="dev-a", config_file=kubeconfig).create_job(name, command, workers=1, data_connection="local-s3")`
	cmdJSON, err := json.Marshal(cmdline)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(py, "-c", script, names["sdk"], c.Kubeconfig, string(cmdJSON)).CombinedOutput(); err != nil {
		t.Fatalf("the SDK did not create the job (%v): %s (make sdk-venv installs it)", err, out)
	}

	accs := map[string]float64{}
	for via, n := range names {
		c.WaitForTrainJob(t, ns, n, 8*time.Minute, trainer.TrainJobComplete, trainer.TrainJobFailed)
		acc, ranks, _ := finalAccuracy(t, user, ns, n)
		if ranks != 1 {
			t.Errorf("%s: %d ranks, want 1", via, ranks)
		}
		accs[via] = acc
	}
	t.Logf("accuracy by interface: %v", accs)
	for via, acc := range accs {
		if acc != accs["cli"] {
			t.Errorf("the job made through %s reached %.4f, through the CLI %.4f", via, acc, accs["cli"])
		}
		if acc < 0.9 {
			t.Errorf("%s: accuracy %.4f after 20 epochs, want >= 0.9", via, acc)
		}
	}
}

// Data in from the connection and the model out on every MPI flavour whose
// image has mpi4py: the connection's variables reach the ranks on the
// Workers (OpenMPI through OMPI_MCA_mca_base_env_list, Hydra by passing the
// environment).
func TestDataConnectionOnEveryMPIFlavour(t *testing.T) {
	c := framework.Get(t)
	c.EnsureImages(t, "openmpi5", "intel", "mpich")
	const ns, user = "team-a", "dev-a"
	for _, f := range []struct{ runtime, launch string }{
		{"mpi-openmpi5", "mpirun"}, {"mpi-intel", "mpijob-mpiexec"}, {"mpi-mpich", "mpijob-mpiexec"},
	} {
		t.Run(f.runtime, func(t *testing.T) {
			t.Parallel()
			name := framework.UniqueName("dc-" + strings.TrimPrefix(f.runtime, "mpi-"))
			expect(t, mpijob(t, user, ns, "create", name, "--runtime", f.runtime, "--workers", "2", "--data-connection", localcluster.DataConnectionName, "--",
				f.launch, "python3", "/opt/mpijob/examples/digits_mpi4py.py", "--data", "s3://$(AWS_S3_BUCKET)/"+localcluster.DigitsDatasetKey,
				"--output", "from-env", "--epochs", "10"), 0)
			t.Cleanup(func() { mpijob(t, user, ns, "delete", name, "--wait=false") })
			c.WaitForTrainJob(t, ns, name, 8*time.Minute, trainer.TrainJobComplete, trainer.TrainJobFailed)
			acc, ranks, _ := finalAccuracy(t, user, ns, name)
			if ranks != 2 || acc < 0.9 {
				t.Errorf("%s: accuracy %.4f on %d ranks, want >= 0.9 on 2", f.runtime, acc, ranks)
			}
			expect(t, mpijob(t, user, ns, "artifacts", name), 0, "model.npz", "metrics.json")
		})
	}
}

// A PVC in and out: one job writes its model to the tenant's shared claim
// (its $MPIJOB_OUTPUT_URI is file:///mnt/shared-data/JOB/ without a data
// connection), a second job mounts the same claim elsewhere and reads it.
func TestPVCInAndOut(t *testing.T) {
	t.Parallel()
	framework.HeavyCPU(t)
	c := framework.Get(t)
	const ns, user = "team-a", "dev-a"
	writer, reader := framework.UniqueName("pvc-out"), framework.UniqueName("pvc-in")
	t.Cleanup(func() { mpijob(t, user, ns, "delete", writer, reader, "--wait=false") })
	expect(t, mpijob(t, user, ns, "create", writer, "--workers", "2", "--pvc", localcluster.SharedClaim, "--",
		"mpirun", "python3", "/opt/mpijob/examples/digits_mpi4py.py", "--output", "from-env", "--epochs", "10"), 0)
	c.WaitForTrainJob(t, ns, writer, 8*time.Minute, trainer.TrainJobComplete, trainer.TrainJobFailed)
	acc, _, _ := finalAccuracy(t, user, ns, writer)
	expect(t, mpijob(t, user, ns, "logs", writer), 0, "model and metrics written to /mnt/"+localcluster.SharedClaim+"/"+writer+"/")
	t.Run("artifacts reads the claim through a reader pod, as the user", func(t *testing.T) {
		r := mpijob(t, user, ns, "artifacts", writer)
		expect(t, r, 0, "model.npz", "metrics.json")
		if !strings.Contains(r.errOut, "Starting a pod that mounts PVC "+localcluster.SharedClaim+" read-only") {
			t.Errorf("artifacts did not say it starts a reader pod:\n%s", r.errOut)
		}
		dir := t.TempDir()
		expect(t, mpijob(t, user, ns, "artifacts", writer, "--download", dir), 0, "[2/2]")
		var metrics struct {
			Accuracy    float64 `json:"accuracy"`
			TestIndices []int   `json:"test_indices"`
		}
		b, err := os.ReadFile(filepath.Join(dir, "metrics.json"))
		if err != nil || json.Unmarshal(b, &metrics) != nil || len(metrics.TestIndices) != 360 {
			t.Fatalf("metrics.json from the claim: %v\n%s", err, b)
		}
		keys := connectionOf(t, ns)
		x, y := readDigits(t, s3Client(t, keys), keys[dataconn.Bucket])
		got := score(t, readNPZ(t, filepath.Join(dir, "model.npz")), x, y, metrics.TestIndices)
		t.Logf("accuracy in the job %.4f (log %.4f), the model from the claim scores %.4f here", metrics.Accuracy, acc, got)
		if math.Abs(got-metrics.Accuracy) > 0.5/360 || math.Abs(got-acc) > 0.5/360+1e-4 {
			t.Errorf("the model downloaded from PVC %s scores %.4f, the job said %.4f", localcluster.SharedClaim, got, metrics.Accuracy)
		}
		// Downloading again replaces nothing unless asked.
		expect(t, mpijob(t, user, ns, "artifacts", writer, "--download", dir), 2, "already exists (and 1 more): nothing was downloaded; give --overwrite to replace")
		expect(t, mpijob(t, user, ns, "artifacts", writer, "--download", dir, "--overwrite"), 0, "[2/2]")
		expect(t, mpijob(t, user, ns, "artifacts", writer, "--download", dir, "--file", "model.pt"), 2,
			"--file model.pt: pvc://"+localcluster.SharedClaim+"/"+writer+"/ has no such artifact; it has metrics.json, model.npz")

		// The dashboard lists them as the user too.
		ts, tokens := dashboardServer(t)
		res := call(t, "GET", ts.URL+"/api/jobs/"+ns+"/"+writer+"/artifacts", tokens[user])
		wantAPI(t, res, 200, `"claim":"`+localcluster.SharedClaim+`"`, `"name":"model.npz"`, `"uri":"pvc://`)
		dl := call(t, "GET", ts.URL+"/api/jobs/"+ns+"/"+writer+"/artifacts/metrics.json", tokens[user])
		if dl.code != 200 || dl.body != string(b) {
			t.Errorf("the dashboard's download of metrics.json: HTTP %d, %d bytes, want the %d bytes the CLI got", dl.code, len(dl.body), len(b))
		}

		// viewer-a may read the job but not start pods: a clear refusal.
		expect(t, mpijob(t, "viewer-a", ns, "artifacts", writer), 4, "reading a claim takes a short-lived pod", "pods/exec", `User "viewer-a" cannot create resource "pods"`)
		// Every reader pod is gone (deleted when done; owned by the job).
		err = wait.PollUntilContextTimeout(context.Background(), time.Second, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			pods := &corev1.PodList{}
			if err := c.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{artifacts.ReaderLabel: writer}); err != nil {
				return false, err
			}
			return len(pods.Items) == 0, nil
		})
		if err != nil {
			t.Errorf("reader pods of %s are left behind: %v", writer, err)
		}
	})

	expect(t, mpijob(t, user, ns, "create", reader, "--workers", "1", "--pvc", localcluster.SharedClaim+":/mnt/in", "--",
		"python3", "-c", fmt.Sprintf(`import json; m = json.load(open("/mnt/in/%s/metrics.json")); print("read accuracy %%.4f" %% m["accuracy"])`, writer)), 0)
	c.WaitForTrainJob(t, ns, reader, 5*time.Minute, trainer.TrainJobComplete, trainer.TrainJobFailed)
	expect(t, mpijob(t, user, ns, "logs", reader), 0, fmt.Sprintf("read accuracy %.4f", acc))

	expect(t, mpijob(t, user, ns, "create", framework.UniqueName("pvc-bad"), "--workers", "1", "--pvc", "no-such-claim"), 2,
		`--pvc "no-such-claim": no such PersistentVolumeClaim in namespace team-a`)
}
