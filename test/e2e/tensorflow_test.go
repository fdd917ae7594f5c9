//go:build e2e

package e2e

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/localcluster/images"
	"github.com/mpijob/mpijob/test/framework"
)

// weightsAgree is digits_tensorflow.py's check that every rank holds the
// same weights at the end.
var weightsAgree = regexp.MustCompile(`weights agree across ranks within ([0-9.e+-]+)`)

// SC-007's TensorFlow example: Keras on TensorFlow's CPU wheel from PyPI,
// data-parallel over Intel MPI (mpi4py's Allreduce) on the mpi-intel
// runtime with the intel-tensorflow image, reaches its stated accuracy on
// 1 and 4 ranks with the same result; a wrong batch size fails with the
// program's words in the diagnosis.
func TestTensorFlowOnIntelMPI(t *testing.T) {
	t.Parallel()
	framework.HeavyCPU(t)
	c := framework.Get(t)
	c.EnsureImages(t, "intel-tensorflow")
	im, _ := images.ImageNamed("intel-tensorflow")
	ns := c.NewNamespace(t, "tf")
	runs := []struct {
		name           string
		workers, slots int
		args           []string
	}{
		{"tf1", 1, 1, nil},
		{"tf4", 2, 2, nil},
		{"tfbad", 2, 2, []string{"--batch-size", "3"}},
	}
	var names []string
	for _, r := range runs {
		names = append(names, r.name)
		args := append([]string{"create", r.name, "--runtime", "mpi-intel", "--image", im.Ref, "--workers", strconv.Itoa(r.workers),
			"--slots-per-worker", strconv.Itoa(r.slots), "--memory", "2Gi", "--",
			"mpijob-mpiexec", "python3", "/opt/mpijob/examples/digits_tensorflow.py"}, r.args...)
		expect(t, mpijob(t, "admin", ns, args...), 0)
	}
	ended := waitForTrainJobs(t, c, ns, 10*time.Minute, names...)
	accs := map[string]float64{}
	for i, r := range runs[:2] {
		if ended[i] != trainer.TrainJobComplete {
			t.Fatalf("%s ended %s:\n%s\n%s", r.name, ended[i], mpijob(t, "admin", ns, "describe", r.name).out, mpijob(t, "admin", ns, "logs", r.name).out)
		}
		acc, ranks, _ := finalAccuracy(t, "admin", ns, r.name)
		logs := mpijob(t, "admin", ns, "logs", r.name).out
		t.Logf("%s: accuracy %.4f on %d ranks", r.name, acc, ranks)
		if ranks != r.workers*r.slots {
			t.Errorf("%s trained on %d ranks, want %d", r.name, ranks, r.workers*r.slots)
		}
		if acc < 0.95 {
			t.Errorf("%s reached %.4f, below the stated 0.95", r.name, acc)
		}
		if !strings.Contains(logs, "MPI Intel(R) MPI Library") {
			t.Errorf("%s did not run on Intel MPI:\n%s", r.name, logs)
		}
		m := weightsAgree.FindStringSubmatch(logs)
		if m == nil {
			t.Fatalf("%s printed no weight check:\n%s", r.name, logs)
		}
		if spread, err := strconv.ParseFloat(m[1], 64); err != nil || spread > 1e-3 {
			t.Errorf("%s: the ranks' weights differ by %s", r.name, m[1])
		}
		accs[r.name] = acc
		if st := finalProgress(t, c, ns, r.name); st.TotalEpochs == nil || *st.TotalEpochs != 20 || math.Abs(st.TrainMetrics["accuracy"]-acc) > 1e-4 {
			t.Errorf("%s's progress %+v, want 20 epochs and accuracy %.4f", r.name, st, acc)
		}
	}
	// float32 sums in another order: the same result within a digit or two of 360.
	if d := math.Abs(accs["tf1"] - accs["tf4"]); d > 0.01 {
		t.Errorf("1 rank reached %.4f, 4 ranks %.4f: they differ by more than 0.01", accs["tf1"], accs["tf4"])
	}
	if ended[2] != trainer.TrainJobFailed {
		t.Fatalf("--batch-size 3 on 4 ranks ended %s, want Failed", ended[2])
	}
	s := c.WaitForStatus(t, ns, "tfbad", time.Minute, func(s api.Status) bool { return s.Phase == api.PhaseFailed })
	if !strings.Contains(s.Message, "--batch-size 3: smaller than the 4 ranks") {
		t.Errorf("the diagnosis does not say the program's words: %s: %s", s.Reason, s.Message)
	}
}
