package diagnose

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/mpijob/mpijob/pkg/api"
)

func TestFindRankFailure(t *testing.T) {
	captured, err := os.ReadFile("testdata/running-logs/mpi4py-rank1-raised.log")
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string) metav1.Time {
		tm, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return metav1.NewTime(tm)
	}
	for name, tc := range map[string]struct {
		log  string
		want *api.RankFailure
	}{
		"a real mpi4py job whose rank 1 raised (captured on the local cluster)": {
			log: string(captured),
			want: &api.RankFailure{Rank: ptr.To(1), Error: "ZeroDivisionError: division by zero", At: at("2026-11-23T21:35:55.892379012Z"),
				Lines: []string{"Traceback (most recent call last):", `  File "<string>", line 1, in <module>`, "ZeroDivisionError: division by zero"}},
		},
		"the first rank to fail is named, its chained exception's last line is the error": {
			log: `2026-11-23T10:00:01Z [1,3]<stderr>:Traceback (most recent call last):
2026-11-23T10:00:01Z [1,3]<stderr>:  File "train.py", line 9, in step
2026-11-23T10:00:01Z [1,3]<stderr>:KeyError: 'x'
2026-11-23T10:00:01Z [1,3]<stderr>:
2026-11-23T10:00:01Z [1,3]<stderr>:During handling of the above exception, another exception occurred:
2026-11-23T10:00:01Z [1,3]<stderr>:
2026-11-23T10:00:02Z [1,3]<stderr>:Traceback (most recent call last):
2026-11-23T10:00:02Z [1,3]<stderr>:  File "train.py", line 11, in step
2026-11-23T10:00:02Z [1,3]<stderr>:RuntimeError: bad batch
2026-11-23T10:00:05Z [1,0]<stderr>:Traceback (most recent call last):
2026-11-23T10:00:05Z [1,0]<stderr>:RuntimeError: later
2026-11-23T10:00:06Z [1,1]<stdout>:still waiting`,
			want: &api.RankFailure{Rank: ptr.To(3), Error: "RuntimeError: bad batch", At: at("2026-11-23T10:00:02Z"),
				Lines: []string{"Traceback (most recent call last):", `  File "train.py", line 11, in step`, "RuntimeError: bad batch"}},
		},
		"a secret in the error is hidden before it is written anywhere": {
			log: `2026-11-23T10:00:01Z [1,1]<stderr>:Traceback (most recent call last):
2026-11-23T10:00:01Z [1,1]<stderr>:  File "train.py", line 9, in connect
2026-11-23T10:00:01Z [1,1]<stderr>:    db = connect("postgres://trainer:s3cretPassw0rd@db:5432/runs", token="hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789")
2026-11-23T10:00:01Z [1,1]<stderr>:OperationalError: cannot reach postgres://trainer:s3cretPassw0rd@db:5432/runs`,
			want: &api.RankFailure{Rank: ptr.To(1), Error: "OperationalError: cannot reach postgres://trainer:[REDACTED]@db:5432/runs", At: at("2026-11-23T10:00:01Z"),
				Lines: []string{"Traceback (most recent call last):", `  File "train.py", line 9, in connect`,
					`    db = connect("postgres://trainer:[REDACTED]@db:5432/runs", token="[REDACTED]")`,
					"OperationalError: cannot reach postgres://trainer:[REDACTED]@db:5432/runs"}},
		},
		"a rank that printed on after its traceback handled it": {
			log: `2026-11-23T10:00:01Z [1,2]<stderr>:Traceback (most recent call last):
2026-11-23T10:00:01Z [1,2]<stderr>:  File "train.py", line 9, in load
2026-11-23T10:00:01Z [1,2]<stderr>:FileNotFoundError: cache.bin
2026-11-23T10:00:02Z [1,2]<stdout>:rebuilding the cache
`,
		},
		"a traceback still being printed is not yet a failure": {
			log: "2026-11-23T10:00:01Z [1,2]<stderr>:Traceback (most recent call last):\n2026-11-23T10:00:01Z [1,2]<stderr>:  File \"train.py\", line 9, in load\n",
		},
		"untagged: a traceback that is the log's last output": {
			log: "2026-11-23T10:00:01Z step 1\n2026-11-23T10:00:02Z Traceback (most recent call last):\n2026-11-23T10:00:02Z   File \"x.py\", line 1\n2026-11-23T10:00:02Z ValueError: nope\n",
			want: &api.RankFailure{Error: "ValueError: nope", At: at("2026-11-23T10:00:02Z"),
				Lines: []string{"Traceback (most recent call last):", `  File "x.py", line 1`, "ValueError: nope"}},
		},
		"untagged: output after the traceback (another rank, or it was handled)": {
			log: "2026-11-23T10:00:02Z Traceback (most recent call last):\n2026-11-23T10:00:02Z ValueError: nope\n2026-11-23T10:00:09Z step 2\n",
		},
		"an NCCL collective timeout": {
			log: "2026-11-23T10:10:00Z [1,5]<stderr>:[rank5]:[E ProcessGroupNCCL.cpp:616] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out.\n",
			want: &api.RankFailure{Rank: ptr.To(5), Error: "[rank5]:[E ProcessGroupNCCL.cpp:616] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out.", At: at("2026-11-23T10:10:00Z"),
				Lines: []string{"[rank5]:[E ProcessGroupNCCL.cpp:616] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out."}},
		},
		"a healthy log": {log: "2026-11-23T10:00:01Z [1,0]<stdout>:epoch 1 loss 0.5\n"},
		"an empty log":  {log: ""},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, FindRankFailure(tc.log)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// A running job with a rank failure says so, with ranked next steps; the
// same job without one runs on.
func TestRankFailedOthersWaiting(t *testing.T) {
	tj := job(2).Obj()
	raw, _ := api.RankFailure{Rank: ptr.To(1), Error: "ZeroDivisionError: division by zero", At: metav1.NewTime(t0),
		Lines: []string{"Traceback (most recent call last):", "ZeroDivisionError: division by zero"}}.Encode()
	tj.Annotations = map[string]string{api.RankFailureAnnotation: raw}
	in := Input{TrainJob: tj, JobSet: jobset(2), Workers: pods(worker("0").Running(true), worker("1").Running(true)),
		Launcher: pods(launcher().Running(false)), SlotsPerWorker: 1, Now: t0.Add(time.Minute)}
	s := diagnoseBoth(t, in)
	if s.Phase != api.PhaseRunning || s.Reason != ReasonRankFailedOthersWaiting {
		t.Fatalf("phase %s reason %s, want Running %s", s.Phase, s.Reason, ReasonRankFailedOthersWaiting)
	}
	for _, want := range []string{"Rank 1 (Worker 0) failed at ", `"ZeroDivisionError: division by zero"`, "the other ranks are waiting for it"} {
		if !strings.Contains(s.Message, want) {
			t.Errorf("message %q lacks %q", s.Message, want)
		}
	}
	if len(s.NextSteps) != 3 || !strings.Contains(s.NextSteps[0], "python -m mpi4py") || !strings.Contains(s.NextSteps[1], "kubectl mpijob delete hello") ||
		!strings.Contains(s.NextSteps[2], "kubectl mpijob logs hello --rank 1") {
		t.Errorf("next steps %q", s.NextSteps)
	}
	if !Warning(s) {
		t.Error("not a warning")
	}
	if !strings.Contains(s.NextSteps[1], `kubectl patch trainjob hello --type merge -p '{"spec":{"suspend":true}}'`) {
		t.Errorf("a job outside Kueue is told to suspend it by spec.suspend: %q", s.NextSteps[1])
	}
	// Under Kueue, spec.suspend is Kueue's (it sets it back within
	// seconds): the advice is the Workload's spec.active.
	queued := in
	queued.Queue = &Queue{Name: "team-a/default", Admitted: true, Workload: "trainjob-hello-1a2b3"}
	if s := diagnoseBoth(t, queued); len(s.NextSteps) != 3 || !strings.Contains(s.NextSteps[1], `kubectl patch workload trainjob-hello-1a2b3 --type merge -p '{"spec":{"active":false}}'`) ||
		strings.Contains(s.NextSteps[1], `"suspend":true`) {
		t.Errorf("a job Kueue manages is told to suspend it with %q", s.NextSteps)
	}
	// Finished jobs say how they ended, not that they wait.
	tj.Status.Conditions = append(tj.Status.Conditions, metav1.Condition{Type: "Failed", Status: metav1.ConditionTrue, Reason: "x", Message: "y"})
	if s := diagnoseBoth(t, in); s.Reason == ReasonRankFailedOthersWaiting {
		t.Errorf("a failed job still says %s", s.Reason)
	}
}

// A rank that failed on an MPI feature the pods shape (spawn with every
// slot taken, seen on Open MPI 4 and 5: the others wait for ever) gets
// that feature's fix first, then the ways out of the wait.
func TestRankFailedOnAnMPILimit(t *testing.T) {
	tj := job(2).Obj()
	raw, _ := api.RankFailure{Rank: ptr.To(0), Error: "mpi4py.MPI.Exception: MPI_ERR_SPAWN: could not spawn processes", At: metav1.NewTime(t0),
		Lines: []string{"  File \"mpi4py/MPI/Comm.pyx\", line 1931, in mpi4py.MPI.Intracomm.Spawn", "mpi4py.MPI.Exception: MPI_ERR_SPAWN: could not spawn processes"}}.Encode()
	tj.Annotations = map[string]string{api.RankFailureAnnotation: raw}
	in := Input{TrainJob: tj, JobSet: jobset(2), Workers: pods(worker("0").Running(true), worker("1").Running(true)),
		Launcher: pods(launcher().Running(false)), SlotsPerWorker: 1, Now: t0.Add(time.Minute)}
	s := diagnoseBoth(t, in)
	if s.Reason != ReasonRankFailedOthersWaiting || !strings.Contains(s.Message, "MPI_Comm_spawn could not start the new ranks") {
		t.Fatalf("%s: %s", s.Reason, s.Message)
	}
	want := []string{"mpirun --oversubscribe", "--runtime mpi-mpich", "mpirun -np N", "kubectl mpijob delete hello", "python -m mpi4py"}
	if len(s.NextSteps) != len(want) {
		t.Fatalf("next steps %q, want %d", s.NextSteps, len(want))
	}
	for i, w := range want {
		if !strings.Contains(s.NextSteps[i], w) {
			t.Errorf("step %d %q lacks %q", i+1, s.NextSteps[i], w)
		}
	}
	// A limit without a pattern of its own for running jobs matches by its
	// failed job's pattern.
	raw, _ = api.RankFailure{Rank: ptr.To(1), Error: "mpi4py.MPI.Exception: MPI_ERR_WIN: invalid window", At: metav1.NewTime(t0)}.Encode()
	tj.Annotations = map[string]string{api.RankFailureAnnotation: raw}
	if s := diagnoseBoth(t, in); s.Reason != ReasonRankFailedOthersWaiting || !strings.Contains(s.NextStep, "--mca osc pt2pt") {
		t.Errorf("%s: first step %q, want osc/pt2pt's", s.Reason, s.NextStep)
	}
}

func TestFindSilentRank(t *testing.T) {
	now := time.Date(2026, 11, 24, 7, 0, 0, 0, time.UTC)
	// lines writes rank r's lines at the given seconds before now.
	lines := func(r string, secsAgo ...int) string {
		var b strings.Builder
		for _, s := range secsAgo {
			b.WriteString(now.Add(-time.Duration(s)*time.Second).Format(time.RFC3339Nano) + " [1," + r + "]<stdout>:step at -" + time.Duration(s*int(time.Second)).String() + "\n")
		}
		return b.String()
	}
	hydra := func(r string, secsAgo ...int) string {
		return strings.ReplaceAll(lines(r, secsAgo...), "[1,"+r+"]<stdout>:", "[0,"+r+"]<stdio>:")
	}
	for name, tc := range map[string]struct {
		log     string
		timeout time.Duration
		want    *int
	}{
		"rank 1 stopped while rank 0 prints on":                      {log: lines("1", 300, 290, 280) + lines("0", 300, 150, 5), timeout: time.Minute, want: ptr.To(1)},
		"through Hydra's tags too":                                   {log: hydra("1", 300, 290, 280) + hydra("0", 300, 150, 5), timeout: time.Minute, want: ptr.To(1)},
		"the longest silent of two":                                  {log: lines("2", 200, 190, 180) + lines("1", 300, 290, 280) + lines("0", 30, 20, 5), timeout: time.Minute, want: ptr.To(1)},
		"every rank printing":                                        {log: lines("1", 30, 20, 10) + lines("0", 30, 20, 5), timeout: time.Minute},
		"all silent is the Launcher's progress check, not a rank's":  {log: lines("1", 300, 290, 280) + lines("0", 300, 290, 200), timeout: time.Minute},
		"a rank that said hello once and left the talking to rank 0": {log: lines("1", 600) + lines("0", 600, 300, 5), timeout: time.Minute},
		"no progress check":                                          {log: lines("1", 300, 290, 280) + lines("0", 300, 150, 5)},
		"untagged lines":                                             {log: strings.ReplaceAll(lines("1", 300, 290, 280)+lines("0", 300, 150, 5), "[1,", "["), timeout: time.Minute},
	} {
		t.Run(name, func(t *testing.T) {
			got := FindSilentRank(tc.log, tc.timeout, now)
			if tc.want == nil {
				if got != nil {
					t.Fatalf("got rank %v silent, want none", *got.Rank)
				}
				return
			}
			if got == nil || got.Rank == nil || *got.Rank != *tc.want || !got.Silent {
				t.Fatalf("got %+v, want rank %d silent", got, *tc.want)
			}
			if !strings.HasPrefix(got.Error, "step at -") {
				t.Errorf("its last line %q", got.Error)
			}
		})
	}
}

// A silent rank is diagnosed with its Worker and ranked next steps; a
// traceback's failure keeps its own reason.
func TestRankSilentDiagnosis(t *testing.T) {
	tj := job(2).Obj()
	raw, _ := api.RankFailure{Rank: ptr.To(1), Error: "step 41 loss 0.2", Lines: []string{"step 41 loss 0.2"}, At: metav1.NewTime(t0), Silent: true}.Encode()
	tj.Annotations = map[string]string{api.RankFailureAnnotation: raw}
	in := Input{TrainJob: tj, JobSet: jobset(2), Workers: pods(worker("0").Running(true), worker("1").Running(true)),
		Launcher: pods(launcher().Running(false)), SlotsPerWorker: 1, Now: t0.Add(5 * time.Minute), ProgressTimeout: 2 * time.Minute}
	s := diagnoseBoth(t, in)
	if s.Phase != api.PhaseRunning || s.Reason != ReasonRankSilent {
		t.Fatalf("phase %s reason %s (%s), want Running %s", s.Phase, s.Reason, s.Message, ReasonRankSilent)
	}
	for _, want := range []string{"Rank 1 (Worker 0) has printed nothing since 2026-11-22T04:00:00Z while the other ranks print on", "allows 2m0s", `"step 41 loss 0.2"`} {
		if !strings.Contains(s.Message, want) {
			t.Errorf("message lacks %q: %s", want, s.Message)
		}
	}
	if len(s.NextSteps) != 3 || !strings.Contains(s.NextSteps[0], "kubectl mpijob logs hello --rank 1") || !strings.Contains(s.NextSteps[1], "kubectl mpijob delete hello") {
		t.Errorf("next steps %q", s.NextSteps)
	}
	if !Warning(s) {
		t.Error("not a warning")
	}
}

func TestPrintedSince(t *testing.T) {
	since := time.Date(2026, 11, 23, 10, 0, 5, 0, time.UTC)
	for name, tc := range map[string]struct {
		log  string
		want bool
	}{
		"the rank printed after":                       {log: "2026-11-23T10:00:01Z [1,1]<stdout>:step 1\n2026-11-23T10:00:09Z [1,1]<stdout>:step 2\n", want: true},
		"the rank's last line is the one already seen": {log: "2026-11-23T10:00:05Z [1,1]<stdout>:step 1\n2026-11-23T10:00:09Z [1,0]<stdout>:step 2\n", want: false},
		// The defect this guards: other ranks' lines filled the lines read,
		// and the silent rank's scrolled out; that is no sign it printed.
		"the rank's lines scrolled out of the lines read": {log: "2026-11-23T10:00:08Z [1,0]<stdout>:step 7\n2026-11-23T10:00:09Z [1,0]<stdout>:step 8\n", want: false},
		"untagged lines say nothing of a rank":            {log: "2026-11-23T10:00:09Z step 8\n", want: false},
		"empty log":                                       {log: "", want: false},
	} {
		t.Run(name, func(t *testing.T) {
			if got := Observe(tc.log, since, 0).PrintedSince(1, since); got != tc.want {
				t.Errorf("PrintedSince = %v, want %v", got, tc.want)
			}
		})
	}
}
