package cli

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// --rank reaches the Worker that hosts the rank by mpirun's default
// placement (ranks fill each Worker's slots in order), --worker the Worker
// by index, and nothing the Launcher; a pod that is not running, or a rank
// or Worker the job does not have, is named with the range.
func TestExecTarget(t *testing.T) {
	pod := func(name, index string, phase corev1.PodPhase) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}, Status: corev1.PodStatus{Phase: phase}}
		if index != "" {
			p.Labels["batch.kubernetes.io/job-completion-index"] = index
		}
		return p
	}
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "pi"}, Spec: trainer.TrainJobSpec{Trainer: &trainer.Trainer{NumNodes: ptr.To[int32](3), NumProcPerNode: ptr.To[int32](4)}}}
	launcher := []corev1.Pod{pod("pi-launcher-0-0-a", "0", corev1.PodRunning)}
	workers := []corev1.Pod{pod("pi-node-0-0-a", "0", corev1.PodRunning), pod("pi-node-0-1-a", "1", corev1.PodRunning), pod("pi-node-0-2-a", "2", corev1.PodPending)}
	cases := map[string]struct {
		t        target
		want     string
		wantWhat string
		err      string
	}{
		"the Launcher by default":        {t: target{worker: -1, rank: -1}, want: "pi-launcher-0-0-a", wantWhat: "the Launcher"},
		"Worker 1":                       {t: target{worker: 1, rank: -1}, want: "pi-node-0-1-a", wantWhat: "Worker 1"},
		"rank 0 on Worker 0":             {t: target{worker: -1, rank: 0}, want: "pi-node-0-0-a", wantWhat: "rank 0 runs on Worker 0"},
		"rank 7 on Worker 1 (4 slots)":   {t: target{worker: -1, rank: 7}, want: "pi-node-0-1-a", wantWhat: "rank 7 runs on Worker 1"},
		"rank 12 of 12 ranks":            {t: target{worker: -1, rank: 12}, err: "--rank 12: the job has 12 ranks (0 to 11: 3 Workers × 4 slots)"},
		"Worker 3 of 3":                  {t: target{worker: 3, rank: -1}, err: "--worker 3: job pi has 3 Workers (0 to 2)"},
		"a Worker not running":           {t: target{worker: 2, rank: -1}, err: "Worker 2 of job pi, which has no running pod now"},
		"rank 9 on a Worker not running": {t: target{worker: -1, rank: 9}, err: "rank 9 runs on Worker 2 of job pi, which has no running pod now"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, what, err := tc.t.choose(tj, launcher, workers)
			if tc.err != "" {
				var ee *exitError
				if !errors.As(err, &ee) || ee.code != ExitNotFound || !strings.Contains(ee.msg, tc.err) {
					t.Fatalf("got %v, want exit %d with %q", err, ExitNotFound, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{tc.want, tc.wantWhat}, []string{got.Name, what}); diff != "" {
				t.Errorf("pod (-want +got):\n%s", diff)
			}
		})
	}
	if _, _, err := (&target{worker: -1, rank: -1}).choose(tj, nil, workers); err == nil || !strings.Contains(err.Error(), "no running Launcher") {
		t.Errorf("no Launcher: %v", err)
	}
}

// Bad input is refused before any API call, naming the flag or the port.
func TestExecAndPortForwardValidate(t *testing.T) {
	none := target{worker: -1, rank: -1}
	cases := map[string]struct {
		err  error
		want string
	}{
		"two targets":      {(&execOptions{name: "pi", command: []string{"ps"}, target: target{launcher: true, worker: 1, rank: -1}}).Validate(), "give one of them"},
		"no command":       {(&execOptions{name: "pi", target: none}).Validate(), "needs a COMMAND after --"},
		"no name":          {(&execOptions{command: []string{"ps"}, target: none}).Validate(), "takes a job NAME"},
		"no port":          {(&portForwardOptions{name: "pi", target: none}).Validate(), "needs at least one port"},
		"a port of words":  {(&portForwardOptions{name: "pi", ports: []string{"tensorboard"}, target: none}).Validate(), `port "tensorboard": the remote port`},
		"a port too high":  {(&portForwardOptions{name: "pi", ports: []string{"8888:70000"}, target: none}).Validate(), `port "8888:70000": the remote port`},
		"a bad local port": {(&portForwardOptions{name: "pi", ports: []string{"x:6006"}, target: none}).Validate(), `port "x:6006": the local port`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var ee *exitError
			if !errors.As(tc.err, &ee) || ee.code != ExitUsage || !strings.Contains(ee.msg, tc.want) {
				t.Errorf("got %v, want a usage error with %q", tc.err, tc.want)
			}
		})
	}
	ok := &portForwardOptions{name: "pi", ports: []string{"6006", "8888:6006", ":6006"}, target: none}
	if err := ok.Validate(); err != nil {
		t.Errorf("good ports refused: %v", err)
	}
}
