//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/minio/minio-go/v7"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/dataconn"
	"github.com/mpijob/mpijob/pkg/diagnose"
	"github.com/mpijob/mpijob/pkg/localcluster"
	"github.com/mpijob/mpijob/test/framework"
)

var resumedLine = regexp.MustCompile(`resumed from epoch (\d+), step (\d+) of (\d+) epochs: (\S+)`)

// digitsCommand is the mpi4py digits example with a checkpoint each epoch
// (its default in a job with a data connection), reading the tenant's copy
// of the digits.
func digitsCommand(extra ...string) []string {
	return append([]string{"--", "mpirun", "python3", "/opt/mpijob/examples/digits_mpi4py.py",
		"--data", "s3://$(AWS_S3_BUCKET)/" + localcluster.DigitsDatasetKey}, extra...)
}

// checkpointsOf lists the checkpoint folders a job of team-a wrote to its
// bucket.
func checkpointsOf(t *testing.T, job string) []string {
	t.Helper()
	keys := connectionOf(t, "team-a")
	var out []string
	prefix := job + "/" + dataconn.CheckpointDir
	for o := range s3Client(t, keys).ListObjects(context.Background(), keys[dataconn.Bucket], minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		if strings.HasSuffix(o.Key, "/manifest.json") {
			out = append(out, strings.TrimSuffix(strings.TrimPrefix(o.Key, prefix), "/manifest.json"))
		}
	}
	return out
}

// A rank that fails once at epoch 5 costs one epoch, not five: --retries
// starts the whole job again, every rank resumes from the checkpoint of
// epoch 4 in the job's own place, the accuracy is an uninterrupted run's,
// and describe names the resume and the retry.
func TestRetryResumesFromCheckpoint(t *testing.T) {
	t.Parallel()
	c := framework.Get(t)
	const ns, user = "team-a", "dev-a"
	name, plain := framework.UniqueName("resume"), framework.UniqueName("plain")
	for _, j := range []struct {
		name string
		args []string
	}{
		{name, append([]string{"--retries", "2"}, digitsCommand("--epochs", "8", "--fail-once-at-epoch", "5")...)},
		{plain, digitsCommand("--epochs", "8", "--checkpoint", "none")},
	} {
		args := append([]string{"create", j.name, "--workers", "2", "--slots-per-worker", "1", "--data-connection", localcluster.DataConnectionName}, j.args...)
		expect(t, mpijob(t, user, ns, args...), 0, "mpijob "+j.name+" created")
		t.Cleanup(func() { mpijob(t, user, ns, "delete", j.name) })
	}
	ended := waitForTrainJobs(t, c, ns, 10*time.Minute, name, plain)
	if ended[0] != trainer.TrainJobComplete || ended[1] != trainer.TrainJobComplete {
		t.Fatalf("the jobs ended %v, want both Complete", ended)
	}
	log := mpijob(t, user, ns, "logs", name).out
	m := resumedLine.FindStringSubmatch(log)
	if m == nil || m[1] != "4" || m[2] != "0" {
		t.Fatalf("the last attempt did not resume from epoch 4 (its log):\n%s", log)
	}
	if !strings.Contains(m[4], "/"+name+"/checkpoints/ckpt-000004-000000000/") {
		t.Errorf("resumed from %s, want the job's own checkpoint of epoch 4", m[4])
	}
	// The log holds both attempts (the log store keeps the first's): the
	// one after the resume trains epochs 5 to 8 only.
	_, after, _ := strings.Cut(log, m[0])
	if strings.Contains(after, "epoch 1/8") || strings.Contains(after, "epoch 4/8") || !strings.Contains(after, "epoch 5/8") || !strings.Contains(after, "epoch 8/8") {
		t.Errorf("the attempt after the failure trained epochs it had already done (or not epochs 5 to 8):\n%s", after)
	}
	got, _, _ := finalAccuracy(t, user, ns, name)
	want, _, _ := finalAccuracy(t, user, ns, plain)
	t.Logf("accuracy after a failure at epoch 5 and a resume: %.4f; uninterrupted: %.4f", got, want)
	if got != want {
		t.Errorf("a resumed run's accuracy %.4f differs from an uninterrupted run's %.4f", got, want)
	}
	if ck := checkpointsOf(t, name); len(ck) != 3 || ck[len(ck)-1] != "ckpt-000008-000000000" {
		t.Errorf("checkpoints in the bucket %v, want the last 3, up to epoch 8", ck)
	}
	st := c.WaitForStatus(t, ns, name, 90*time.Second, func(s api.Status) bool { return s.Resumed != nil })
	if st.Resumed.Epoch != 4 || st.Attempts == nil || st.Attempts.Retries != 1 || st.Attempts.MaxRetries != 2 {
		t.Errorf("status resumed %+v, attempts %+v: want epoch 4, retry 1 of 2", st.Resumed, st.Attempts)
	}
	expect(t, mpijob(t, user, ns, "describe", name), 0, "Resumed:", "resumed from epoch 4 of 8", "Attempts:", "retry 1 of 2", "(this attempt: ")
	t.Run("the dashboard shows it", func(t *testing.T) {
		ts, _ := dashboardServer(t)
		browserCheck(t, "resume.mjs", ts.URL, "Resumed and Attempts on the job page", "JOB="+name)
	})
}

// --resume-from starts a new job from another job's last checkpoint; a
// typo is refused before anything is created, and a checkpoint of another
// model fails the job with both models named, never loaded in part.
func TestResumeFromAnotherJob(t *testing.T) {
	t.Parallel()
	c := framework.Get(t)
	const ns, user = "team-a", "dev-a"
	first := framework.UniqueName("first")
	create := func(name string, extra ...string) result {
		args := append([]string{"create", name, "--workers", "2", "--slots-per-worker", "1", "--data-connection", localcluster.DataConnectionName}, extra...)
		return mpijob(t, user, ns, args...)
	}
	expect(t, create(first, digitsCommand("--epochs", "3")...), 0, "created")
	t.Cleanup(func() { mpijob(t, user, ns, "delete", first) })
	if got := c.WaitForTrainJob(t, ns, first, 8*time.Minute, trainer.TrainJobComplete, trainer.TrainJobFailed); got != trainer.TrainJobComplete {
		t.Fatalf("%s ended %s", first, got)
	}

	t.Run("a typo is refused, naming the job it may mean", func(t *testing.T) {
		r := create(framework.UniqueName("typo"), append([]string{"--resume-from", first + "x"}, digitsCommand()...)...)
		expect(t, r, 2, "--resume-from", "no MPI job "+first+"x", "did you mean "+first+"?")
		r = create(framework.UniqueName("typo"), append([]string{"--resume-from", "gs://bucket/x/"}, digitsCommand()...)...)
		expect(t, r, 2, "--resume-from", "s3://BUCKET/PATH/")
	})

	t.Run("the next job starts after the other's last epoch", func(t *testing.T) {
		next := framework.UniqueName("next")
		expect(t, create(next, append([]string{"--resume-from", first}, digitsCommand("--epochs", "5")...)...), 0, "created")
		t.Cleanup(func() { mpijob(t, user, ns, "delete", next) })
		if got := c.WaitForTrainJob(t, ns, next, 8*time.Minute, trainer.TrainJobComplete, trainer.TrainJobFailed); got != trainer.TrainJobComplete {
			t.Fatalf("%s ended %s:\n%s", next, got, mpijob(t, user, ns, "logs", next).out)
		}
		log := mpijob(t, user, ns, "logs", next).out
		m := resumedLine.FindStringSubmatch(log)
		if m == nil || m[1] != "3" || !strings.Contains(m[4], "/"+first+"/checkpoints/") {
			t.Fatalf("%s did not resume from %s's epoch 3:\n%s", next, first, log)
		}
		if ck := checkpointsOf(t, next); len(ck) == 0 || ck[len(ck)-1] != "ckpt-000005-000000000" {
			t.Errorf("%s's own checkpoints %v, want its own place up to epoch 5", next, ck)
		}
		st := c.WaitForStatus(t, ns, next, 90*time.Second, func(s api.Status) bool { return s.Resumed != nil })
		if !strings.Contains(st.Resumed.Text(), "another job's checkpoint") {
			t.Errorf("status says %q, want another job's checkpoint named", st.Resumed.Text())
		}
	})

	t.Run("a checkpoint of another model is refused", func(t *testing.T) {
		other := framework.UniqueName("other")
		expect(t, create(other, append([]string{"--resume-from", first}, digitsCommand("--epochs", "5", "--hidden", "32")...)...), 0, "created")
		t.Cleanup(func() { mpijob(t, user, ns, "delete", other) })
		c.WaitForTrainJob(t, ns, other, 8*time.Minute, trainer.TrainJobComplete, trainer.TrainJobFailed)
		log := mpijob(t, user, ns, "logs", other).out
		if !strings.Contains(log, "is a checkpoint of another model") || !strings.Contains(log, "Nothing was loaded") || strings.Contains(log, "epoch 4/5") {
			t.Errorf("a job of another model loaded or trained on:\n%s", log)
		}
	})
}

// Kueue preempts a running low-priority MPI job for a high one in a
// ClusterQueue that preempts by priority: the low job stops whole and is
// said to be Preempted (by which job, why, where it waits), the high one
// runs, and the low one is admitted again and finishes from its
// checkpoint.
func TestPreemptionResumes(t *testing.T) {
	t.Parallel()
	c := framework.Get(t)
	const ns, user = "team-a", "dev-a"
	ctx := context.Background()
	suffix := strings.ToLower(framework.UniqueName("p"))
	lowPC, highPC, cqName, lqName := "low-"+suffix, "high-"+suffix, "preempt-"+suffix, "preempt-"+suffix
	objs := []string{
		fmt.Sprintf(`{"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"WorkloadPriorityClass","metadata":{"name":%q},"value":10}`, lowPC),
		fmt.Sprintf(`{"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"WorkloadPriorityClass","metadata":{"name":%q},"value":1000}`, highPC),
		// Room for one 2-Worker digits job at a time (each pod asks 100m).
		fmt.Sprintf(`{"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"ClusterQueue","metadata":{"name":%q},"spec":{
			"namespaceSelector":{"matchLabels":{"mpijob.dev/tenant":"team-a"}},"queueingStrategy":"BestEffortFIFO",
			"preemption":{"withinClusterQueue":"LowerPriority"},
			"resourceGroups":[{"coveredResources":["cpu","memory","nvidia.com/gpu"],"flavors":[{"name":"default-flavor","resources":[
				{"name":"cpu","nominalQuota":"450m"},{"name":"memory","nominalQuota":"8Gi"},{"name":"nvidia.com/gpu","nominalQuota":"0"}]}]}]}}`, cqName),
		fmt.Sprintf(`{"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"LocalQueue","metadata":{"name":%q,"namespace":%q},"spec":{"clusterQueue":%q}}`, lqName, ns, cqName),
	}
	for _, raw := range objs {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON([]byte(raw)); err != nil {
			t.Fatal(err)
		}
		if err := c.Client.Create(ctx, u); err != nil {
			t.Fatalf("create %s %s: %v", u.GetKind(), u.GetName(), err)
		}
		t.Cleanup(func() { _ = c.Client.Delete(context.Background(), u) })
	}
	low, high := framework.UniqueName("low"), framework.UniqueName("high")
	create := func(name, pc string, extra ...string) {
		args := append([]string{"create", name, "--workers", "2", "--slots-per-worker", "1", "--data-connection", localcluster.DataConnectionName,
			"--queue", lqName, "--priority", pc}, extra...)
		expect(t, mpijob(t, user, ns, args...), 0, "created")
		t.Cleanup(func() { mpijob(t, user, ns, "delete", name) })
	}
	create(low, lowPC, digitsCommand("--epochs", "12", "--epoch-seconds", "4")...)
	c.WaitForStatus(t, ns, low, 5*time.Minute, func(s api.Status) bool {
		return s.Phase == api.PhaseRunning && len(checkpointsOf(t, low)) >= 2
	})
	create(high, highPC, digitsCommand("--epochs", "2", "--checkpoint", "none")...)

	// From running to preempted, never "Admitted" between: a queue read
	// a few seconds old said so while Kueue was stopping the job.
	var between []string
	st := c.WaitForStatus(t, ns, low, 3*time.Minute, func(s api.Status) bool {
		if s.Phase != api.PhaseRunning && s.Reason != diagnose.ReasonPreempted {
			between = append(between, string(s.Phase)+"/"+s.Reason)
		}
		return s.Reason == diagnose.ReasonPreempted
	})
	t.Logf("the low job's status between running and preempted: %v", between)
	if slices.Contains(between, string(api.PhaseQueued)+"/"+diagnose.ReasonAdmitted) {
		t.Errorf("between running and preempted the low job's status was %v: Admitted before Preempted", between)
	}
	for _, want := range []string{"Preempted", "make room for job " + high, "prioritization in the ClusterQueue", "starts again by itself"} {
		if !strings.Contains(st.Message, want) {
			t.Errorf("the low job's status %q lacks %q", st.Message, want)
		}
	}
	if got := c.WaitForTrainJob(t, ns, high, 8*time.Minute, trainer.TrainJobComplete, trainer.TrainJobFailed); got != trainer.TrainJobComplete {
		t.Fatalf("the high job ended %s", got)
	}
	if got := c.WaitForTrainJob(t, ns, low, 10*time.Minute, trainer.TrainJobComplete, trainer.TrainJobFailed); got != trainer.TrainJobComplete {
		t.Fatalf("the low job ended %s:\n%s", got, mpijob(t, user, ns, "describe", low).out)
	}
	log := mpijob(t, user, ns, "logs", low).out
	m := resumedLine.FindStringSubmatch(log)
	if m == nil || m[1] == "0" {
		t.Fatalf("the low job started again from zero after its preemption:\n%s", log)
	}
	t.Logf("the low job resumed from epoch %s, step %s after its preemption", m[1], m[2])
	final := c.WaitForStatus(t, ns, low, 90*time.Second, func(s api.Status) bool { return s.Attempts != nil && s.Attempts.Preemptions > 0 })
	if final.Attempts.Preemptions != 1 {
		t.Errorf("attempts %+v, want preempted once", final.Attempts)
	}
	expect(t, mpijob(t, user, ns, "describe", low), 0, "Attempts:", "preempted once", "Resumed:")
	named := false
	for _, e := range c.WaitForManagerEvents(t, ns, low, []string{diagnose.ReasonPreempted}, time.Minute) {
		named = named || (e.Reason == diagnose.ReasonPreempted && strings.Contains(e.Message, high))
	}
	if !named {
		t.Errorf("no Preempted Event names %s", high)
	}
	// The attempt after the re-admission is news of its own: the earlier
	// attempt's Launcher and Workers, stopped by the preemption, are not
	// reported again as deleted, evicted or failed once Kueue admits the
	// job again.
	tj := &trainer.TrainJob{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: low}, tj); err != nil {
		t.Fatal(err)
	}
	var resumed time.Time
	for _, cond := range tj.Status.Conditions {
		if cond.Type == trainer.TrainJobSuspended && cond.Reason == trainer.TrainJobResumedReason {
			resumed = cond.LastTransitionTime.Time
		}
	}
	if resumed.IsZero() {
		t.Fatalf("the low job has no Resumed condition: %+v", tj.Status.Conditions)
	}
	for _, e := range c.WaitForManagerEvents(t, ns, low, nil, time.Second) {
		last := api.EventTime(e)
		stale := e.Reason == diagnose.ReasonWorkerEvicted || e.Reason == diagnose.ReasonLauncherDeleted || e.Reason == diagnose.ReasonLauncherFailed
		if stale && !last.Before(resumed) {
			t.Errorf("after the re-admission at %s, a %s Event about the earlier attempt (at %s): %s", resumed.Format(time.RFC3339), e.Reason, last.Format(time.RFC3339), e.Message)
		}
	}
}

// A job's YAML is enough to run it again: the TrainJob of a job with a
// per-job runtime (a data connection), exported with kubectl and renamed,
// is created again with kubectl mpijob create -f and with plain kubectl
// create -f, and each copy runs with a runtime, artifacts and checkpoint
// place of its own.
func TestExportedJobRunsAgain(t *testing.T) {
	t.Parallel()
	c := framework.Get(t)
	const ns, user = "team-a", "dev-a"
	orig := framework.UniqueName("orig")
	expect(t, mpijob(t, user, ns, append([]string{"create", orig, "--workers", "1", "--slots-per-worker", "2", "--data-connection", localcluster.DataConnectionName},
		digitsCommand("--epochs", "2")...)...), 0, "created")
	t.Cleanup(func() { mpijob(t, user, ns, "delete", orig) })
	if got := c.WaitForTrainJob(t, ns, orig, 8*time.Minute, trainer.TrainJobComplete, trainer.TrainJobFailed); got != trainer.TrainJobComplete {
		t.Fatalf("%s ended %s", orig, got)
	}
	out, err := c.Kubectl(t, user, ns, "", "get", "trainjob", orig, "-o", "yaml")
	if err != nil {
		t.Fatal(err)
	}
	// Two copies: one with kubectl mpijob create -f, one with plain
	// kubectl create -f (the mutating webhook copies the runtime).
	again, plain := framework.UniqueName("again"), framework.UniqueName("plain")
	fileFor := func(name string) string {
		file := t.TempDir() + "/job.yaml"
		if err := os.WriteFile(file, []byte(strings.Replace(out, "name: "+orig+"\n", "name: "+name+"\n", 1)), 0o600); err != nil {
			t.Fatal(err)
		}
		return file
	}
	expect(t, mpijob(t, user, ns, "create", "-f", fileFor(again)), 0, "mpijob "+again+" created")
	t.Cleanup(func() { mpijob(t, user, ns, "delete", again) })
	if got, err := c.Kubectl(t, user, ns, "", "create", "-f", fileFor(plain)); err != nil || !strings.Contains(got, plain+" created") {
		t.Fatalf("kubectl create -f of the renamed export: %v\n%s", err, got)
	}
	t.Cleanup(func() { mpijob(t, user, ns, "delete", plain) })
	for _, name := range []string{again, plain} {
		if got := c.WaitForTrainJob(t, ns, name, 8*time.Minute, trainer.TrainJobComplete, trainer.TrainJobFailed); got != trainer.TrainJobComplete {
			t.Fatalf("%s ended %s:\n%s", name, got, mpijob(t, user, ns, "describe", name).out)
		}
		tj := &trainer.TrainJob{}
		if err := c.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, tj); err != nil {
			t.Fatal(err)
		}
		if tj.Spec.RuntimeRef.Name != name {
			t.Errorf("the copy %s runs on runtime %s, want its own", name, tj.Spec.RuntimeRef.Name)
		}
		rt := &trainer.TrainingRuntime{}
		if err := c.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, rt); err != nil {
			t.Errorf("the copy %s has no runtime of its own: %v", name, err)
		} else if len(rt.OwnerReferences) != 1 || rt.OwnerReferences[0].UID != tj.UID {
			t.Errorf("the runtime of %s is owned by %v, want the job alone (deleted with it)", name, rt.OwnerReferences)
		}
		if ck := checkpointsOf(t, name); len(ck) == 0 {
			t.Errorf("the copy %s wrote no checkpoint under its own place %s/checkpoints/", name, name)
		}
		if log := mpijob(t, user, ns, "logs", name).out; strings.Contains(log, "resumed from") {
			t.Errorf("the copy %s resumed from the original's checkpoints instead of starting on its own:\n%s", name, log)
		}
	}
	if ck := checkpointsOf(t, orig); len(ck) != 2 {
		t.Errorf("the original's checkpoint place holds %d checkpoints after its copies ran, want its own 2: %v", len(ck), ck)
	}
}

// stoppedLine is what a reference workload's rank prints once it saved on
// SIGTERM.
var stoppedLine = regexp.MustCompile(`rank 0: stopped by SIGTERM at epoch (\d+), step (\d+); the checkpoint has it`)

// A stopped job stops gracefully: when a running job is suspended, its
// ranks get SIGTERM before sshd on the Workers stops (the runtimes'
// preStop hooks), agree at the next step, rank 0 saves where they are
// (mid-epoch) within the pods' grace period, and every rank exits. Resumed,
// the job goes on from that step, not from the last epoch's end.
func TestGracefulStopSavesACheckpoint(t *testing.T) {
	t.Parallel()
	c := framework.Get(t)
	const ns, user = "team-a", "dev-a"
	name := framework.UniqueName("graceful")
	create := func(extra ...string) result {
		args := append([]string{"create", name, "--workers", "2", "--slots-per-worker", "1", "--data-connection", localcluster.DataConnectionName}, extra...)
		return mpijob(t, user, ns, append(args, digitsCommand("--epochs", "8", "--epoch-seconds", "4")...)...)
	}
	expect(t, create("--grace-period", "2h"), 2, `--grace-period "2h"`, "is more than 1h")
	expect(t, create("--grace-period", "2 min"), 2, `--grace-period "2 min"`, "is not a duration")
	expect(t, create("--grace-period", "2m"), 0, "created")
	t.Cleanup(func() { mpijob(t, user, ns, "delete", name) })
	c.WaitForStatus(t, ns, name, 5*time.Minute, func(s api.Status) bool {
		return s.Phase == api.PhaseRunning && len(checkpointsOf(t, name)) >= 1
	})
	pods := &corev1.PodList{}
	if err := c.Client.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels{"jobset.sigs.k8s.io/jobset-name": name}); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if g := p.Spec.TerminationGracePeriodSeconds; g == nil || *g != 120 {
			t.Errorf("pod %s has a grace period of %v s, want --grace-period 2m (120 s)", p.Name, g)
		}
	}
	expect(t, mpijob(t, user, ns, "describe", name), 0, "Grace period:", "2m")
	expect(t, mpijob(t, user, ns, "suspend", name), 0, "suspended")
	c.WaitForStatus(t, ns, name, 2*time.Minute, func(s api.Status) bool { return s.Phase == api.PhaseSuspended })

	// The lines of the stopped pods, from the log store (logs of a
	// suspended job read it). Each pod's log reaches the store on its own
	// (a Worker's file on another node may come a pass after the
	// Launcher's), so the read is repeated until both are there.
	const workerSaid = "mpijob: the pod is stopping: SIGTERM to the ranks here"
	var log string
	var last result
	var m []string
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		last = mpijob(t, user, ns, "logs", name, "--all")
		log = last.out
		if m = stoppedLine.FindStringSubmatch(log); m != nil && strings.Contains(log, workerSaid) {
			break
		}
		time.Sleep(3 * time.Second)
	}
	if m == nil {
		pods, _ := c.Kubectl(t, "admin", ns, "", "get", "pods", "-l", "jobset.sigs.k8s.io/jobset-name="+name, "-o", "wide")
		t.Fatalf("no rank saved on SIGTERM when the job was suspended:\n%s\nstderr: %s\nits pods:\n%s", log, last.errOut, pods)
	}
	if !strings.Contains(log, workerSaid) {
		t.Errorf("no Worker said it sent SIGTERM to its ranks:\n%s", log)
	}
	epoch, _ := strconv.Atoi(m[1])
	step, _ := strconv.Atoi(m[2])
	want := fmt.Sprintf("ckpt-%06d-%09d", epoch-1, step)
	if ck := checkpointsOf(t, name); !slices.Contains(ck, want) {
		t.Fatalf("the checkpoint saved on SIGTERM (%s) is not in the job's place: %v", want, ck)
	}
	t.Logf("saved on SIGTERM: epoch %d, step %d", epoch-1, step)

	expect(t, mpijob(t, user, ns, "resume", name), 0, "resumed")
	if got := c.WaitForTrainJob(t, ns, name, 8*time.Minute, trainer.TrainJobComplete, trainer.TrainJobFailed); got != trainer.TrainJobComplete {
		t.Fatalf("%s ended %s after its resume:\n%s", name, got, mpijob(t, user, ns, "describe", name).out)
	}
	log = mpijob(t, user, ns, "logs", name).out
	r := resumedLine.FindStringSubmatch(log)
	if r == nil || r[1] != strconv.Itoa(epoch-1) || r[2] != strconv.Itoa(step) {
		t.Errorf("after the resume the job did not go on from epoch %d, step %d (the SIGTERM save):\n%s", epoch-1, step, log)
	}
}
