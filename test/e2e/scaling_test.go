//go:build e2e

package e2e

import (
	"encoding/json"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/test/framework"
)

// lastEpochLoss finds the reference CNN's epoch lines (tagged by the runtime's mpirun, or not).
var lastEpochLoss = regexp.MustCompile(`(?m)(?:^|<stdout>:)epoch (\d+)/(\d+) loss ([\d.]+) test accuracy`)

// The reference CNN (examples/training/cnn_torch.py) on the local cluster:
// its accuracy mode reaches its target on 1, 2 and 4 ranks with the same
// result (float64, so the order of the ranks' sums changes nothing that
// shows), the same model through Horovod reaches it too, the throughput
// mode prints its table and a line a benchmark parses, and wrong values
// fail with the program's own words in the diagnosis.
func TestReferenceCNN(t *testing.T) {
	t.Parallel()
	framework.HeavyCPU(t)
	c := framework.Get(t)
	c.EnsureImages(t, "horovod")
	ns := c.NewNamespace(t, "cnn")
	// Small enough for 2 shared cores: width 8, 4000 images, 3 epochs.
	accuracy := []string{"--mode", "accuracy", "--width", "8", "--samples", "4000", "--epochs", "3", "--precision", "float64", "--target-accuracy", "0.95"}
	type run struct {
		name, runtime, script string
		workers, slots        int
		args                  []string
	}
	runs := []run{
		{"cnn1", "mpi-openmpi", "cnn_torch.py", 1, 1, accuracy},
		{"cnn2", "mpi-openmpi", "cnn_torch.py", 1, 2, accuracy},
		// Four ranks sum bucket by bucket during backward: the same result still.
		{"cnn4", "mpi-openmpi", "cnn_torch.py", 2, 2, append(append([]string{}, accuracy...), "--overlap", "--bucket-mb", "0.01")},
		{"hvd2", "mpi-horovod", "cnn_horovod.py", 2, 1, []string{"--width", "8", "--samples", "4000", "--epochs", "3", "--target-accuracy", "0.95"}},
		{"tput", "mpi-openmpi", "cnn_torch.py", 2, 1, []string{"--mode", "throughput", "--width", "16", "--steps", "8", "--warmup", "2", "--baseline-steps", "4", "--overlap", "--bucket-mb", "0.1"}},
	}
	var names []string
	for _, r := range runs {
		names = append(names, r.name)
		args := append([]string{"create", r.name, "--runtime", r.runtime, "--workers", strconv.Itoa(r.workers), "--slots-per-worker", strconv.Itoa(r.slots), "--memory", "2Gi", "--",
			"mpirun", "python3", "/opt/mpijob/examples/" + r.script}, r.args...)
		expect(t, mpijob(t, "admin", ns, args...), 0)
	}
	ended := waitForTrainJobs(t, c, ns, 12*time.Minute, names...)
	for i, r := range runs {
		if ended[i] != trainer.TrainJobComplete {
			d := mpijob(t, "admin", ns, "describe", r.name)
			l := mpijob(t, "admin", ns, "logs", r.name)
			t.Fatalf("%s ended %s:\n%s\n%s", r.name, ended[i], d.out, l.out)
		}
	}

	t.Run("accuracy mode: the target on 1, 2 and 4 ranks, with the same result", func(t *testing.T) {
		accs, losses := map[string]float64{}, map[string]float64{}
		for _, r := range runs[:4] {
			acc, ranks, secs := finalAccuracy(t, "admin", ns, r.name)
			logs := mpijob(t, "admin", ns, "logs", r.name).out
			m := lastEpochLoss.FindAllStringSubmatch(logs, -1)
			if len(m) != 3 {
				t.Fatalf("%s printed %d epoch lines, want 3:\n%s", r.name, len(m), logs)
			}
			loss, _ := strconv.ParseFloat(m[2][3], 64)
			t.Logf("%-15s %d ranks: accuracy %.4f, last loss %.4f, in %.1f s", r.script, ranks, acc, loss, secs)
			if ranks != r.workers*r.slots {
				t.Errorf("%s ran on %d ranks, want %d", r.name, ranks, r.workers*r.slots)
			}
			if acc < 0.95 {
				t.Errorf("%s reached %.4f, below its target 0.95 (yet exited 0)", r.name, acc)
			}
			accs[r.name], losses[r.name] = acc, loss
		}
		for _, n := range []string{"cnn2", "cnn4"} {
			if d := math.Abs(accs[n] - accs["cnn1"]); d > 0.003 {
				t.Errorf("%s's accuracy %.4f differs from one rank's %.4f by %.4f (> 0.003, one test image)", n, accs[n], accs["cnn1"], d)
			}
			if d := math.Abs(losses[n] - losses["cnn1"]); d > 0.001 {
				t.Errorf("%s's last loss %.4f differs from one rank's %.4f by %.4f (> 0.001)", n, losses[n], losses["cnn1"], d)
			}
		}
		// The job's progress is the workload's own report.
		st := finalProgress(t, c, ns, "cnn4")
		if st.TotalEpochs == nil || *st.TotalEpochs != 3 || math.Abs(st.TrainMetrics["accuracy"]-accs["cnn4"]) > 1e-4 {
			t.Errorf("cnn4's progress %+v, want 3 epochs and accuracy %.4f", st, accs["cnn4"])
		}
	})

	t.Run("throughput mode: its table and the line a benchmark parses", func(t *testing.T) {
		logs := mpijob(t, "admin", ns, "logs", "tput").out
		if !strings.Contains(logs, "samples/s") || !strings.Contains(logs, "efficiency") {
			t.Errorf("no table in the Launcher's log:\n%s", logs)
		}
		i := strings.LastIndex(logs, "MPIJOB_THROUGHPUT ")
		if i < 0 {
			t.Fatalf("no MPIJOB_THROUGHPUT line:\n%s", logs)
		}
		line := strings.SplitN(logs[i+len("MPIJOB_THROUGHPUT "):], "\n", 2)[0]
		var got struct {
			Ranks        int     `json:"ranks"`
			Device       string  `json:"device"`
			Total        float64 `json:"samples_per_second"`
			PerRank      float64 `json:"samples_per_second_per_rank"`
			OneRank      float64 `json:"one_rank_samples_per_second"`
			Efficiency   float64 `json:"efficiency"`
			AllreduceMB  float64 `json:"allreduce_mb"`
			BatchPerRank int     `json:"batch_per_rank"`
			Overlap      bool    `json:"overlap"`
			Share        float64 `json:"allreduce_share"`
			Waiting      float64 `json:"waiting_for_slowest_share"`
			Fastest      float64 `json:"compute_ms_fastest_rank"`
			Slowest      float64 `json:"compute_ms_slowest_rank"`
		}
		if err := json.Unmarshal([]byte(line), &got); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		t.Logf("throughput on 2 Workers: %+v", got)
		if got.Ranks != 2 || got.Device != "cpu" || got.BatchPerRank != 64 {
			t.Errorf("ranks %d on %q with batch %d, want 2 on cpu with 64", got.Ranks, got.Device, got.BatchPerRank)
		}
		// The line rounds samples/s to 0.1 and the efficiency (taken from the
		// unrounded figures) to 0.001, so the ratio of the printed figures
		// may differ from it by their rounding: up to 0.05 on each, which
		// weighs more the slower one rank ran.
		ratio := got.Total / (2 * got.OneRank)
		slack := ratio*(0.05/got.Total+0.05/got.OneRank)*1.01 + 0.0005
		if got.Total <= 0 || got.OneRank <= 0 || math.Abs(got.PerRank*2-got.Total) > 0.2 || math.Abs(got.Efficiency-ratio) > slack {
			t.Errorf("figures that do not add up: %+v", got)
		}
		if !got.Overlap || got.Fastest <= 0 || got.Fastest > got.Slowest || got.Waiting < 0 || got.Share <= 0 || got.Share >= 1 {
			t.Errorf("want overlapped sums, compute per step by rank (fastest <= slowest) and shares of a step: %+v", got)
		}
	})

	t.Run("wrong values fail with the program's words", func(t *testing.T) {
		bad := []struct{ name, reason, want string }{
			{"badbatch", "", "--global-batch 3 is smaller than the 4 ranks"},
			{"nogpu", "NoGPU", "rank 0 sees no GPU"},
		}
		expect(t, mpijob(t, "admin", ns, "create", "badbatch", "--workers", "2", "--slots-per-worker", "2", "--",
			"mpirun", "python3", "/opt/mpijob/examples/cnn_torch.py", "--global-batch", "3"), 0)
		expect(t, mpijob(t, "admin", ns, "create", "nogpu", "--workers", "1", "--",
			"mpirun", "python3", "/opt/mpijob/examples/cnn_torch.py", "--device", "cuda"), 0)
		for _, b := range bad {
			st := c.WaitForStatus(t, ns, b.name, 4*time.Minute, func(s api.Status) bool { return s.Phase == api.PhaseFailed })
			if b.reason != "" && st.Reason != b.reason {
				t.Errorf("%s: reason %s (%s), want %s", b.name, st.Reason, st.Message, b.reason)
			}
			if !strings.Contains(st.Message, b.want) {
				t.Errorf("%s: the diagnosis %q does not quote %q", b.name, st.Message, b.want)
			}
		}
	})
}
