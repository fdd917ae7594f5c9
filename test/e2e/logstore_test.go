//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/localcluster"
	"github.com/mpijob/mpijob/pkg/logstore"
	"github.com/mpijob/mpijob/test/framework"
)

// bigLogLines is how many numbered lines rank 0 prints: with mpirun's
// rank tag and the kubelet's prefix, the Launcher's log passes the
// kubelet's rotation size (10 MiB) well before the job ends.
const bigLogLines = 110000

// bigLogProgram prints the numbered lines, waits for the kubelet to
// rotate the Launcher's log (it checks every 10 s), and prints one more.
var bigLogProgram = fmt.Sprintf(`from mpi4py import MPI
import sys, time
r = MPI.COMM_WORLD.Get_rank()
# Into the Worker container's own log (its sshd's stdout), as a rank's
# tool that logs to the container would.
with open("/proc/1/fd/1", "w") as w:
    w.write("rank %%d wrote this on its Worker\n" %% r)
if r == 1:
    print("rank 1 says password=hunter2", flush=True)
# rank 0's flood after rank 1's line: mpirun would put a line of rank 1
# in the middle of one of rank 0's that it read in two parts.
MPI.COMM_WORLD.Barrier()
time.sleep(1)
if r == 0:
    pad = "x" * 88
    for i in range(%d):
        sys.stdout.write("line %%06d %%s\n" %% (i, pad))
    sys.stdout.flush()
MPI.COMM_WORLD.Barrier()
time.sleep(30)
if r == 0:
    print("after rotation", flush=True)
`, bigLogLines)

// quiet runs kubectl-mpijob as dev-a in team-a, logging its stderr and
// the size of its (large) stdout.
func quiet(t *testing.T, args ...string) result {
	t.Helper()
	r := runCLI(t, "dev-a", "team-a", args...)
	t.Logf("kubectl mpijob %s → exit %d, %d bytes of stdout\n%s", strings.Join(args, " "), r.code, len(r.out), r.errOut)
	return r
}

var numbered = regexp.MustCompile(`line (\d{6}) x`)

// untagged takes out the rank tags mpirun puts inside a line it read in
// two parts, so such a line counts as the one line the rank printed.
func untagged(out string) string { return strings.ReplaceAll(out, "[1,0]<stdout>:", "") }

// allNumbered checks that out holds every numbered line once, in order.
// mpirun tags each chunk it reads from a rank, so a line split across two
// reads carries the tag twice ("line 0000[1,0]<stdout>:90 x"): as the
// Launcher printed it, which the store keeps; the check reads past that.
func allNumbered(t *testing.T, out string) {
	t.Helper()
	next := 0
	for _, m := range numbered.FindAllStringSubmatch(untagged(out), -1) {
		n, _ := strconv.Atoi(m[1])
		if n != next {
			t.Fatalf("line %d follows line %d: lines lost, repeated or out of order", n, next-1)
		}
		next++
	}
	if next != bigLogLines {
		t.Fatalf("%d of the %d numbered lines", next, bigLogLines)
	}
}

// Logs outlive the pods: a Launcher log larger than the kubelet's
// rotation size reads whole (the rotated lines from the store, then the
// pod's), and once every pod is gone the store serves the Launcher's and
// the Workers' lines, with ranks, redacted, to the job's own tenant only.
func TestLogsOutliveThePods(t *testing.T) {
	t.Parallel()
	framework.HeavyCPU(t)
	c := framework.Get(t)
	const ns, user = "team-a", "dev-a"
	name := framework.UniqueName("keep")
	t.Cleanup(func() { mpijob(t, user, ns, "delete", name, "--wait=false") })
	expect(t, mpijob(t, user, ns, "create", name, "--workers", "2", "--", "mpirun", "python3", "-c", bigLogProgram), 0)
	s := c.WaitForStatus(t, ns, name, 6*time.Minute, func(s api.Status) bool { return s.Phase.Finished() })
	if s.Phase != api.PhaseSucceeded {
		t.Fatalf("job %s: %s %s: %s", name, s.Phase, s.Reason, s.Message)
	}
	// The collector ships the lines asynchronously (it reads every second,
	// and 110,000 lines take a while under a loaded CI machine: a fixed 5 s
	// saw 101,091 of them): wait until the store holds the whole Launcher
	// log before reading it back.
	waitFor(t, 3*time.Minute, "the log store to hold every line of the Launcher", func() (bool, string) {
		r := runCLI(t, user, ns, "logs", name, "--source", "store")
		n := len(numbered.FindAllString(untagged(r.out), -1))
		return n >= bigLogLines, fmt.Sprintf("%d of %d lines stored", n, bigLogLines)
	})

	t.Run("the kubelet rotated the Launcher's log", func(t *testing.T) {
		r := quiet(t, "logs", name, "--source", "pods")
		expect(t, r, 0, "after rotation")
		if strings.Contains(r.out, "line 000000 ") {
			t.Fatalf("the pod's log still starts at the first line: the kubelet did not rotate it, so this test proves nothing")
		}
	})

	t.Run("the whole log, rotated lines from the store first", func(t *testing.T) {
		r := quiet(t, "logs", name)
		expect(t, r, 0, "after rotation", "come from the log store: the kubelet rotated them out of the pod's log")
		allNumbered(t, r.out)
	})

	// Every pod of the job goes, as when JobSet cleans up or a node is
	// drained.
	if err := c.Client.DeleteAllOf(context.Background(), &corev1.Pod{}, client.InNamespace(ns),
		client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: name}, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Minute, "the job's pods to be gone", func() (bool, string) {
		pods := &corev1.PodList{}
		if err := c.Client.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: name}); err != nil {
			return false, err.Error()
		}
		return len(pods.Items) == 0, fmt.Sprintf("%d pods left", len(pods.Items))
	})

	t.Run("the Launcher's lines from the store once its pod is gone", func(t *testing.T) {
		r := quiet(t, "logs", name)
		expect(t, r, 0, "after rotation", "Lines of launcher come from the log store: the pod is gone")
		allNumbered(t, r.out)
		if strings.Contains(r.out, "hunter2") || !strings.Contains(r.out, "password=[REDACTED]") {
			t.Errorf("the stored line with a password is not redacted")
		}
	})
	t.Run("ranks, Workers and --all from the store", func(t *testing.T) {
		r := mpijob(t, user, ns, "logs", name, "--rank", "1")
		expect(t, r, 0, "[1,1]<stdout>:rank 1 says password=[REDACTED]")
		if strings.Contains(r.out, "[1,0]") {
			t.Errorf("--rank 1 printed rank 0's lines")
		}
		for i := 0; i < 2; i++ {
			r := mpijob(t, user, ns, "logs", name, "--worker", strconv.Itoa(i))
			expect(t, r, 0, "Lines of worker-"+strconv.Itoa(i)+" come from the log store", "wrote this on its Worker")
		}
		r = quiet(t, "logs", name, "--all", "--tail", "3")
		expect(t, r, 0, "Lines of launcher, worker-0, worker-1 come from the log store", "[launcher] [1,0]<stdout>:after rotation")
	})
	t.Run("the post-mortem: pods and transitions kept in the status", func(t *testing.T) {
		r := mpijob(t, user, ns, "describe", name)
		expect(t, r, 0, "gone; as mpijob-manager last saw them:", "worker-1", "launcher  "+name+"-launcher-", "Completed (exit 0)", "(their logs: kubectl mpijob logs "+name+" --all)")
		st := c.WaitForStatus(t, ns, name, time.Second, func(api.Status) bool { return true })
		var phases []string
		for _, h := range st.History {
			phases = append(phases, string(h.Phase))
		}
		if len(st.History) < 2 || st.History[len(st.History)-1].Phase != api.PhaseSucceeded || !slices.Contains(phases, string(api.PhaseRunning)) {
			t.Errorf("the status's history %v, want Running then Succeeded last", phases)
		}
		if len(st.Pods) != 3 {
			t.Errorf("the status keeps %d pods, want the Launcher and 2 Workers: %+v", len(st.Pods), st.Pods)
		}
		for _, p := range st.Pods {
			if p.Node == "" || p.State == "" || p.Pod == "" {
				t.Errorf("recorded pod %+v: want its name, node and last state", p)
			}
		}
	})
	t.Run("a viewer of the namespace reads them; another tenant does not", func(t *testing.T) {
		r := mpijob(t, "viewer-a", ns, "logs", name, "--rank", "1")
		expect(t, r, 0, "[1,1]<stdout>:rank 1 says")
		path := logstore.Path(ns, name)
		out, err := c.Kubectl(t, "dev-b", "", "", "get", "--raw", path)
		if err == nil || !strings.Contains(out+err.Error(), "Forbidden") && !strings.Contains(out+err.Error(), "forbidden") {
			t.Errorf("dev-b read team-a's stored log: %v\n%.300s", err, out)
		}
		if strings.Contains(out, "line 000000") {
			t.Errorf("dev-b got team-a's lines")
		}
		// The store itself takes only mpijob-manager's token.
		for _, u := range []string{
			localcluster.LogStoreURL + "/loki/api/v1/query_range?query=" + url.QueryEscape(`{kubernetes_namespace_name="team-a"}`),
			localcluster.LogStoreURL + "/loki/api/v1/push",
		} {
			req, _ := http.NewRequest(http.MethodGet, u, nil)
			req.Header.Set("X-Scope-OrgID", "team-a")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized || strings.Contains(string(b), "line 0") {
				t.Errorf("GET %s without the token: %s %.200s", u, resp.Status, b)
			}
		}
	})
	t.Run("the dashboard shows the stored log and says so", func(t *testing.T) {
		ts, tokens := dashboardServer(t)
		req, _ := http.NewRequest(http.MethodGet, ts.URL+"/api/jobs/"+ns+"/"+name+"/logs?target=all&tail=5", nil)
		req.Header.Set("Authorization", "Bearer "+tokens["dev-a"])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "[launcher] [1,0]<stdout>:after rotation") || !strings.Contains(string(b), "[worker-1] ") {
			t.Errorf("dashboard logs of a job whose pods are gone: %s\n%.500s", resp.Status, b)
		}
		if got := resp.Header.Get(logstore.SourceHeader); got != logstore.SourceStore {
			t.Errorf("%s: %q, want %q", logstore.SourceHeader, got, logstore.SourceStore)
		}
		r := call(t, http.MethodGet, ts.URL+"/api/jobs/"+ns+"/"+name+"/logs?target=launcher", tokens["dev-b"])
		if r.code == http.StatusOK && strings.Contains(r.body, "line 0") {
			t.Errorf("dev-b read team-a's stored log through the dashboard")
		}
	})
	t.Run("the store holds OpenShift Logging 6's labels and records", func(t *testing.T) {
		// What a LokiStack fed by OpenShift Logging holds, asked the way an
		// OpenShift user asks it: Vector's stream labels, and a JSON record
		// whose message Loki's own json parser takes out.
		q := url.Values{
			"query": {fmt.Sprintf(`{kubernetes_namespace_name=%q, kubernetes_labels_jobset_sigs_k8s_io_jobset_name=%q, kubernetes_labels_jobset_sigs_k8s_io_replicatedjob_name="launcher", kubernetes_container_name="node", log_type="application"} |= "rank 1 says" | json | line_format "{{.message}}"`, ns, name)},
			"limit": {"5"},
			"start": {strconv.FormatInt(time.Now().Add(-time.Hour).UnixNano(), 10)},
		}
		req, _ := http.NewRequest(http.MethodGet, localcluster.LokiURL+"/loki/api/v1/query_range?"+q.Encode(), nil)
		req.Header.Set("X-Scope-OrgID", ns)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		var ans struct {
			Data struct {
				Result []struct {
					Stream map[string]string `json:"stream"`
					Values [][2]string       `json:"values"`
				} `json:"result"`
			} `json:"data"`
		}
		if err := json.Unmarshal(b, &ans); err != nil || resp.StatusCode != http.StatusOK || len(ans.Data.Result) == 0 {
			t.Fatalf("query by OpenShift Logging's labels: %s %v %.300s", resp.Status, err, b)
		}
		r := ans.Data.Result[0]
		if len(r.Values) == 0 || !strings.HasPrefix(r.Values[0][1], "[1,1]<stdout>:rank 1 says") {
			t.Errorf("the record's message is not the rank's line: %v", r.Values)
		}
		for _, l := range []string{"kubernetes_pod_name", "kubernetes_host", "openshift_log_type", "kubernetes_labels_batch_kubernetes_io_job_completion_index", "kubernetes_labels_jobset_sigs_k8s_io_jobset_uid"} {
			if r.Stream[l] == "" {
				t.Errorf("stream label %s missing: %v", l, r.Stream)
			}
		}
		if !strings.HasPrefix(r.Stream["kubernetes_pod_name"], name+"-launcher-") {
			t.Errorf("kubernetes_pod_name %q is not the Launcher's pod", r.Stream["kubernetes_pod_name"])
		}
	})
	t.Run("the store keeps 24 hours", func(t *testing.T) {
		resp, err := http.Get(localcluster.LokiURL + "/config")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		for _, want := range []string{"retention_enabled: true", "retention_period: 1d"} {
			if !strings.Contains(string(b), want) {
				t.Errorf("Loki's configuration lacks %q", want)
			}
		}
	})
}

// A stored log is that of the job that exists now: a job deleted and
// created again under the same name shows only the new job's lines, never
// the earlier one's (nor would a namespace made again show its earlier
// tenant's), and a name with no job has no stored log at all.
func TestStoredLogIsTheJobThatExists(t *testing.T) {
	t.Parallel()
	c := framework.Get(t)
	const ns, user = "team-a", "dev-a"
	name := framework.UniqueName("again")
	t.Cleanup(func() { mpijob(t, user, ns, "delete", name, "--wait=false") })
	run := func(word string) {
		t.Helper()
		expect(t, mpijob(t, user, ns, "create", name, "--workers", "1", "--", "mpirun", "sh", "-c", "echo incarnation "+word), 0)
		s := c.WaitForStatus(t, ns, name, 4*time.Minute, func(s api.Status) bool { return s.Phase.Finished() })
		if s.Phase != api.PhaseSucceeded {
			t.Fatalf("job %s (%s): %s %s: %s", name, word, s.Phase, s.Reason, s.Message)
		}
		waitFor(t, time.Minute, "the "+word+" lines in the store", func() (bool, string) {
			r := quiet(t, "logs", name, "--source", "store")
			return strings.Contains(r.out, "incarnation "+word), r.out
		})
	}
	run("first")
	expect(t, mpijob(t, user, ns, "delete", name, "--wait=true"), 0)
	// Once its JobSet is gone too (the garbage collector follows the
	// job), the name has no stored log: the read is empty.
	path := logstore.Path(ns, name)
	waitFor(t, time.Minute, "the stored log of the deleted job to be empty", func() (bool, string) {
		out, err := c.Kubectl(t, user, "", "", "get", "--raw", path)
		return err == nil && !strings.Contains(out, "incarnation first"), out
	})
	run("second")
	r := quiet(t, "logs", name, "--source", "store")
	expect(t, r, 0, "incarnation second")
	if strings.Contains(r.out, "incarnation first") {
		t.Errorf("the job created again shows the earlier job's lines:\n%s", r.out)
	}
}

// A job stopped by its timeout keeps its log: Trainer deletes the JobSet
// of a job past its activeDeadlineSeconds, and the store's answer was
// bound to the JobSet, so `logs` printed nothing and exited 0 (a new user
// lost the logs of four timed-out jobs, and the diagnosis's next step was
// to read them). The status keeps the Launcher's start, so get shows a
// duration.
func TestLogsOfATimedOutJob(t *testing.T) {
	t.Parallel()
	c := framework.Get(t)
	const ns, user = "team-a", "dev-a"
	name := framework.UniqueName("timeout")
	t.Cleanup(func() { mpijob(t, user, ns, "delete", name, "--wait=false") })
	expect(t, mpijob(t, user, ns, "create", name, "--workers", "2", "--timeout", "1m", "--",
		"mpirun", "-np", "2", "sh", "-c", `i=0; while true; do echo "tick $i"; i=$((i+1)); sleep 1; done`), 0)
	s := c.WaitForStatus(t, ns, name, 4*time.Minute, func(s api.Status) bool { return s.Phase == api.PhaseFailed })
	if s.StartTime == nil {
		t.Errorf("the timed-out job's status has no start time: %+v", s)
	}
	waitFor(t, 2*time.Minute, "the job's pods to be gone", func() (bool, string) {
		pods := &corev1.PodList{}
		if err := c.Client.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: name}); err != nil {
			return false, err.Error()
		}
		return len(pods.Items) == 0, fmt.Sprintf("%d pods", len(pods.Items))
	})
	waitFor(t, time.Minute, "the timed-out job's stored lines", func() (bool, string) {
		r := runCLI(t, user, ns, "logs", name)
		return r.code == 0 && strings.Contains(r.out, "tick 20"), fmt.Sprintf("exit %d, %d bytes", r.code, len(r.out))
	})
	if r := mpijob(t, user, ns, "get", name); strings.Contains(r.out, "Failed") && strings.HasSuffix(strings.TrimSpace(r.out), "-") {
		t.Errorf("get shows no duration for the timed-out job:\n%s", r.out)
	}
}

// A pod speaks for a job only when the job's own controllers made it: a
// tenant's pod that copies a running job's JobSet labels (its UID too) and
// its Launcher's name has its lines stored as nobody's, and the job's log
// shows only the job's own lines (the red team's forged log).
func TestForgedPodLinesAreNotTheJobs(t *testing.T) {
	t.Parallel()
	c := framework.Get(t)
	const ns, user = "team-a", "dev-a"
	name := framework.UniqueName("genuine")
	expect(t, mpijob(t, user, ns, "create", name, "--workers", "1", "--", "mpirun", "sh", "-c", "echo genuine line; sleep 90"), 0, "created")
	t.Cleanup(func() { mpijob(t, user, ns, "delete", name, "--wait=false") })
	c.WaitForStatus(t, ns, name, 4*time.Minute, func(s api.Status) bool { return s.Phase == api.PhaseRunning })
	js := &jobsetv1alpha2.JobSet{}
	if err := c.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, js); err != nil {
		t.Fatal(err)
	}
	forged := name + "-launcher-0-0-zzzzz"
	pod := fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":%q,"labels":{
		"jobset.sigs.k8s.io/jobset-name":%q,"jobset.sigs.k8s.io/replicatedjob-name":"launcher",
		"batch.kubernetes.io/job-completion-index":"0","jobset.sigs.k8s.io/jobset-uid":%q}},
	  "spec":{"restartPolicy":"Never","securityContext":{"runAsNonRoot":true,"runAsUser":1000,"seccompProfile":{"type":"RuntimeDefault"}},
	    "containers":[{"name":"node","image":"ghcr.io/mpijob/openmpi:4.1","imagePullPolicy":"IfNotPresent",
	      "command":["sh","-c","echo FORGED rank failure line"],
	      "resources":{"requests":{"cpu":"10m","memory":"16Mi"},"limits":{"cpu":"100m","memory":"64Mi"}},
	      "securityContext":{"allowPrivilegeEscalation":false,"capabilities":{"drop":["ALL"]}}}]}}`, forged, name, string(js.UID))
	if out, err := c.Kubectl(t, user, ns, pod, "create", "-f", "-"); err != nil {
		t.Fatalf("dev-a could not create the forged pod: %v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = c.Kubectl(t, user, ns, "", "delete", "pod", forged, "--wait=false") })
	waitFor(t, 2*time.Minute, "the forged pod to have run", func() (bool, string) {
		out, err := c.Kubectl(t, user, ns, "", "logs", forged)
		return err == nil && strings.Contains(out, "FORGED"), out
	})
	waitFor(t, time.Minute, "the job's own line in the store", func() (bool, string) {
		r := quiet(t, "logs", name, "--all", "--source", "store")
		return strings.Contains(r.out, "genuine line"), r.out
	})
	// The collector passes every second: give it several.
	time.Sleep(10 * time.Second)
	if r := quiet(t, "logs", name, "--all", "--source", "store"); strings.Contains(r.out, "FORGED") {
		t.Errorf("the forged pod's line is stored as job %s's:\n%s", name, r.out)
	}
}
