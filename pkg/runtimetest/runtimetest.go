// Package runtimetest checks an MPI runtime by running it: a job of 1
// Launcher and 2 Workers with the runtime's own test program, watched for
// three checks (image pull, SSH key mount, MPI spawn). `kubectl mpijob
// runtimes test` and the dashboard's Test runtime both run it.
package runtimetest

import (
	"context"
	"fmt"
	"strings"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/jobpods"
	"github.com/mpijob/mpijob/pkg/jobstatus"
	"github.com/mpijob/mpijob/pkg/runtimes"
)

// Results of a check.
const (
	Pass    = "PASS"
	Fail    = "FAIL"
	Running = "RUNNING"
	// Skip is a check that does not apply: the runtime's command prints no
	// rank placement to check.
	Skip = "SKIP"
)

// Check is one check's result: PASS, FAIL or RUNNING (not decided yet).
type Check struct {
	Name   string `json:"name"`
	Result string `json:"result"`
	Detail string `json:"detail"`
}

// Progress is where a test stands.
type Progress struct {
	// Job is the test job's name, in Namespace.
	Job       string    `json:"job"`
	Namespace string    `json:"namespace"`
	Phase     api.Phase `json:"phase,omitempty"`
	Checks    []Check   `json:"checks"`
	// Done is set once the checks are final.
	Done bool `json:"done"`
}

// Failed reports whether a check failed or the job did not finish.
func (p Progress) Failed() bool {
	for _, c := range p.Checks {
		if c.Result != Pass && c.Result != Skip {
			return true
		}
	}
	return !p.Phase.Finished()
}

// Options of a test run.
type Options struct {
	// Timeout bounds the whole test; time spent waiting for the local
	// cluster to build an image for its first use (the job's reason
	// ImageBuilding) does not count, up to BuildWait.
	Timeout time.Duration
	// BuildWait is the most a test waits for images being built (0: 30m).
	BuildWait time.Duration
	// Keep leaves the test job for inspection.
	Keep bool
	// Progress, if set, is called at every look with the checks so far.
	Progress func(Progress)
	// Log, if set, reads a pod's log (as the user): the Launcher's tells
	// where the ranks ran ("rank placement").
	Log func(ctx context.Context, ns, pod string) (string, error)
}

// Run tests the ClusterTrainingRuntime rt with a job in namespace ns,
// created with c (the user's rights), and returns the final checks. The job
// is deleted at the end unless o.Keep.
func Run(ctx context.Context, c client.Client, ns string, rt *trainer.ClusterTrainingRuntime, o Options) (Progress, error) {
	if !runtimes.IsMPI(&rt.Spec) {
		return Progress{}, fmt.Errorf("runtime %s is not an MPI runtime", rt.Name)
	}
	tj := &trainer.TrainJob{}
	tj.Name, tj.Namespace = "rt-test-"+rand.String(5), ns
	tj.Spec.RuntimeRef = trainer.RuntimeRef{Name: rt.Name, APIGroup: ptr.To(trainer.GroupVersion.Group), Kind: ptr.To(runtimes.KindOf(rt))}
	nodes := int32(2)
	if runtimes.LauncherAsNode(&rt.Spec) {
		nodes = 3
	}
	tj.Spec.Trainer = &trainer.Trainer{NumNodes: ptr.To(nodes)}
	if err := c.Create(ctx, tj); err != nil {
		return Progress{}, err
	}
	if !o.Keep {
		defer func() {
			_ = c.Delete(context.WithoutCancel(ctx), tj, client.PropagationPolicy(metav1.DeletePropagationBackground))
		}()
	}
	p := Progress{Job: tj.Name, Namespace: ns}
	var (
		obs  observed
		last api.Status
	)
	report := func() {
		if o.Progress != nil {
			o.Progress(p)
		}
	}
	p.Checks = obs.live(last)
	report()
	buildWait := o.BuildWait
	if buildWait == 0 {
		buildWait = 30 * time.Minute
	}
	var building time.Duration // time the job spent waiting for an image build
	start := time.Now()
	lastTick := start
	_ = wait.PollUntilContextTimeout(ctx, time.Second, o.Timeout+buildWait, true, func(ctx context.Context) (bool, error) {
		now := time.Now()
		if last.Reason == ReasonImageBuilding {
			building += now.Sub(lastTick)
		}
		lastTick = now
		if time.Since(start)-min(building, buildWait) > o.Timeout {
			return true, nil
		}
		cur := &trainer.TrainJob{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(tj), cur); err != nil {
			// A busy API server's timeout or throttling is not the
			// runtime's failure: ask again at the next tick.
			if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
				return false, err
			}
			return false, nil
		}
		if err := jobstatus.Get(ctx, c, cur); err != nil {
			return false, nil //nolint:nilerr // as above: the next tick reads it again
		}
		s, _ := api.StatusOf(cur)
		p.Phase, last = s.Phase, s
		// Pods are watched while the job runs: once it finishes, JobSet
		// stops the Workers, so what they showed must be recorded before.
		jp, err := jobpods.ListLive(ctx, c, tj)
		launcher, workers := jp.Launchers, jp.Workers
		if err != nil {
			return false, nil //nolint:nilerr // as above: the next tick lists them again
		}
		obs.building = ""
		if s.Reason == ReasonImageBuilding {
			// The pull fails until the image is imported: not the
			// runtime's failure, and the kubelet retries on its own.
			obs.building, obs.pullFailure = s.Message, ""
		} else if obs.pullFailure != "" {
			// The image builder's own word on a pod, read directly: the
			// diagnosis that turns it into ImageBuilding can lag on a
			// busy cluster.
			if msg := builderSays(ctx, c, ns, append(launcher, workers...)); msg != "" {
				obs.building, obs.pullFailure = msg, ""
			}
		}
		obs.record(launcher, workers)
		p.Checks = obs.live(s)
		report()
		// A pull failure ends the test once it has lasted pullGrace with
		// no image build under way: on the local cluster, the image
		// builder starts one within seconds of the first failure.
		return s.Phase.Finished() || (obs.pullFailure != "" && time.Since(obs.pullFailedAt) > pullGrace), nil
	})
	p.Checks = []Check{obs.imageCheck(), obs.sshCheck(2, p.Phase), spawnCheck(last)}
	if o.Log != nil && p.Phase == api.PhaseSucceeded {
		p.Checks = append(p.Checks, obs.placementCheck(ctx, o.Log, rt, ns))
	}
	p.Done = true
	report()
	return p, nil
}

// pullGrace is how long a pull failure may last before it fails the test:
// long enough for the local cluster's image builder to say it builds the
// image (ImageBuilding).
const pullGrace = 20 * time.Second

// builderSays is the local cluster's image builder's last word on one of
// pods while it builds or has just imported that pod's image (its
// BuildingImage or ImageBuilt Event), or "" when its last word is a failed
// build or it said none: elsewhere there is no builder.
func builderSays(ctx context.Context, c client.Client, ns string, pods []corev1.Pod) string {
	evs := &corev1.EventList{}
	if err := c.List(ctx, evs, client.InNamespace(ns)); err != nil {
		return ""
	}
	var last *corev1.Event
	for _, p := range pods {
		if e := api.LastBuilderEvent(evs.Items, p.Name); e != nil && (last == nil || api.EventTime(*e).After(api.EventTime(*last))) {
			last = e
		}
	}
	if last == nil || (last.Reason != api.EventBuildingImage && last.Reason != api.EventImageBuilt) {
		return ""
	}
	return last.Message
}

// ReasonImageBuilding is the diagnosis's reason while the local cluster
// builds an image for its first use (diagnose.ReasonImageBuilding).
const ReasonImageBuilding = "ImageBuilding"

// live is the checks while the job runs: decided ones, and RUNNING.
func (o *observed) live(s api.Status) []Check {
	img := Check{"image pull", Running, "waiting for the pods to start their images"}
	if o.pullFailure != "" && time.Since(o.pullFailedAt) <= pullGrace {
		return []Check{{"image pull", Running, "a pull failed; waiting " + pullGrace.String() + " for an image build to start: " + o.pullFailure},
			{"SSH key mount", Running, "waiting for the image"}, {"MPI spawn", Running, "waiting for the image"}}
	}
	if o.building != "" {
		return []Check{{"image pull", Running, o.building}, {"SSH key mount", Running, "waiting for the image"}, {"MPI spawn", Running, "waiting for the image"}}
	}
	if o.pods != nil && (o.pullFailure != "" || (o.pods.Len() > 0 && o.started.Len() == o.pods.Len() && o.pods.Len() >= 3)) {
		img = o.imageCheck()
	}
	ssh := Check{"SSH key mount", Running, "waiting for the Workers' sshd"}
	if o.sshReady != nil && o.sshReady.Len() >= 2 {
		ssh = o.sshCheck(2, s.Phase)
	}
	spawn := Check{"MPI spawn", Running, "waiting for the Launcher's mpirun"}
	if s.Phase.Finished() {
		spawn = spawnCheck(s)
	}
	return []Check{img, ssh, spawn}
}

// observed is what the pods of a runtime test showed at any time while the
// job ran.
type observed struct {
	pods         sets.Set[string] // every pod seen
	started      sets.Set[string] // pods whose containers all started their images
	sshReady     sets.Set[string] // Workers whose sshd passed its readiness probe
	pullFailure  string           // the first image pull failure seen
	building     string           // the diagnosis's word while the local cluster builds an image
	pullFailedAt time.Time        // when pullFailure was first seen
	notStarted   string           // a pod and image not started yet, at the last look
	launcher     corev1.Pod       // the Launcher, as last seen
	workerHosts  sets.Set[string] // the Workers' host names
}

// placementCheck reads the Launcher's log: where mpi-hello's ranks say
// they ran must be the Workers, one rank per slot, none on a Launcher that
// hosts no ranks (OpenMPI 5 without Trainer's hostfile runs them all there).
func (o *observed) placementCheck(ctx context.Context, readLog func(context.Context, string, string) (string, error), rt *trainer.ClusterTrainingRuntime, ns string) Check {
	const name = "rank placement"
	if o.launcher.Name == "" {
		return Check{name, Fail, "the Launcher pod was not seen"}
	}
	log, err := readLog(ctx, ns, o.launcher.Name)
	if err != nil {
		return Check{name, Fail, fmt.Sprintf("cannot read the Launcher's log: %v", err)}
	}
	pl := ParsePlacement(log)
	if len(pl.Hosts) == 0 {
		return Check{name, Skip, "the runtime's command prints no \"rank R of N on HOST\" lines to check"}
	}
	slots := 1
	if mpi := rt.Spec.MLPolicy; mpi != nil && mpi.MPI != nil && mpi.MPI.NumProcPerNode != nil {
		slots = int(*mpi.MPI.NumProcPerNode)
	}
	hosts := sets.List(o.workerHosts)
	launcher := o.launcher.Spec.Hostname
	if runtimes.LauncherAsNode(&rt.Spec) {
		hosts, launcher = append(hosts, launcher), ""
	}
	if err := pl.Check(hosts, launcher, slots); err != nil {
		return Check{name, Fail, err.Error()}
	}
	return Check{name, Pass, fmt.Sprintf("%d ranks ran on the job's %d rank hosts, %d on each", len(pl.Hosts), len(hosts), slots)}
}

func (o *observed) record(launcher, workers []corev1.Pod) {
	if o.pods == nil {
		o.pods, o.started, o.sshReady, o.workerHosts = sets.New[string](), sets.New[string](), sets.New[string](), sets.New[string]()
	}
	o.notStarted = ""
	failing := "" // the first pull that fails now
	for _, p := range append(launcher, workers...) {
		o.pods.Insert(p.Name)
		all := len(p.Status.ContainerStatuses) > 0
		for _, c := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			if api.PullFailed(c) && failing == "" {
				failing = fmt.Sprintf("pod %s: %s: %s", p.Name, c.State.Waiting.Reason, c.State.Waiting.Message)
			}
		}
		for _, c := range p.Status.ContainerStatuses {
			if c.ImageID == "" && c.State.Running == nil && c.State.Terminated == nil {
				all = false
				if !o.started.Has(p.Name) {
					o.notStarted = fmt.Sprintf("pod %s never started %s", p.Name, c.Image)
				}
			}
		}
		if all {
			o.started.Insert(p.Name)
		}
	}
	switch {
	case failing == "":
		// A pull that failed and then worked (the kubelet's retry after
		// the local cluster imported the image) is no failure.
		o.pullFailure = ""
	case o.pullFailure == "" && o.building == "":
		o.pullFailure, o.pullFailedAt = failing, time.Now()
	}
	if len(launcher) > 0 {
		o.launcher = launcher[0]
	}
	for _, p := range workers {
		o.workerHosts.Insert(p.Spec.Hostname)
		for _, c := range p.Status.ContainerStatuses {
			if c.Ready {
				o.sshReady.Insert(p.Name)
			}
		}
	}
}

func (o *observed) imageCheck() Check {
	switch {
	case o.pullFailure != "":
		return Check{"image pull", Fail, o.pullFailure}
	case o.pods.Len() == 0:
		return Check{"image pull", Fail, "no pod was created"}
	case o.started.Len() < o.pods.Len() && o.notStarted != "":
		return Check{"image pull", Fail, o.notStarted}
	}
	return Check{"image pull", Pass, fmt.Sprintf("%d pods started their images", o.started.Len())}
}

func (o *observed) sshCheck(want int, phase api.Phase) Check {
	n := o.sshReady.Len()
	if n < want && phase == api.PhaseSucceeded {
		// Too quick to be seen Ready between two looks, but mpirun on the
		// Launcher reached every Worker over SSH with the job's key.
		return Check{"SSH key mount", Pass, "the Launcher's mpirun logged in to every Worker with the job's key"}
	}
	if n < want {
		return Check{"SSH key mount", Fail, fmt.Sprintf("%d of %d Workers' sshd came up with the job's key", n, want)}
	}
	return Check{"SSH key mount", Pass, fmt.Sprintf("%d Workers' sshd accepted connections with the job's key", o.sshReady.Len())}
}

func spawnCheck(s api.Status) Check {
	switch s.Phase {
	case api.PhaseSucceeded:
		return Check{"MPI spawn", Pass, "the Launcher's mpirun ran ranks on the Workers and exited 0"}
	case api.PhaseFailed:
		return Check{"MPI spawn", Fail, strings.TrimSpace(s.Reason + ": " + s.Message)}
	}
	return Check{"MPI spawn", Fail, fmt.Sprintf("the job is still %s: %s", s.Phase, s.Message)}
}
