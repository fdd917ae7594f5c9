package diagnose

import (
	"cmp"
	"fmt"
	"iter"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/runtimes"
)

// explainUnfinished places a job that has neither finished nor been
// suspended, and says what it waits for.
func explainUnfinished(in Input, s api.Status) (api.Phase, finding) {
	if r, m, n, ok := quotaExceeded(in.Events); ok {
		return api.PhasePending, finding{reason: r, message: m, next: n}
	}
	if r, m, n, ok := podsRefused(in); ok {
		return api.PhasePending, finding{reason: r, message: m, next: n}
	}
	if in.JobSet == nil && deadlineReached(in) {
		// Trainer removed the JobSet at the timeout and has not yet said
		// so on the job: that, not "not created", is what happens.
		return in.Previous.Phase, finding{reason: ReasonDeadlineExceeded,
			message: fmt.Sprintf("The job reached its %s; Trainer is stopping it.", timeoutOf(in.TrainJob)), next: deadlineNext()}
	}
	if in.JobSet == nil {
		return api.PhasePending, finding{reason: ReasonJobSetNotCreated, message: "Trainer has not created the job's pods yet.",
			next: ranked(stepf("Wait a few seconds; if this lasts, check that the Trainer controller runs and read `%s`.", cli("events")))}
	}
	all := sortedByIndex(in.Workers, in.Launcher)
	if r, m, n, ok := imageBuilding(all, in.Events, in.Now); ok {
		return api.PhaseStarting, finding{reason: r, message: m, next: n}
	}
	if r, m, n, who, ok := imagePull(all); ok {
		phase := api.PhaseStarting
		if unscheduled(in.Workers) > 0 {
			phase = api.PhasePending
		}
		return phase, finding{reason: r, message: m, next: n, subject: who}
	}
	switch s.Launcher {
	case api.LauncherRunning, api.LauncherDeleted:
		// A Launcher gone in the same moment as a Worker was stopped by
		// the Worker's loss (JobSet ends the job); one deleted on its own
		// was said first and stays the news.
		if p := in.Previous; s.Launcher == api.LauncherDeleted && p != nil && p.Reason == ReasonLauncherDeleted {
			break
		}
		if m, n, lost, ok := workerLost(in, s.WorkersTotal); ok {
			if p := in.Previous; p != nil && p.Reason == ReasonWorkerEvicted && p.Phase == api.PhaseRunning {
				// The first Worker lost is the news: the others stop
				// after it (mpirun gives up, Trainer ends the job), and
				// naming them instead would hide the cause.
				// (A status written before subjects: the Worker lost now.)
				return api.PhaseRunning, finding{reason: ReasonWorkerEvicted, message: p.Message, next: previousSteps(p), subject: cmp.Or(p.Subject, lost)}
			}
			return api.PhaseRunning, finding{reason: ReasonWorkerEvicted, message: m, next: n, subject: lost}
		}
	case api.LauncherFailed:
		// The Launcher ran, so every Worker had been placed: Workers that
		// are gone now are being stopped, not waiting to be scheduled.
		if p := in.Previous; p != nil && p.Reason == ReasonWorkerEvicted && p.Phase == api.PhaseRunning {
			// mpirun failed because a Worker was lost: that stays the news.
			return api.PhaseRunning, finding{reason: ReasonWorkerEvicted, message: p.Message, next: previousSteps(p), subject: p.Subject}
		}
		return api.PhaseRunning, finding{reason: ReasonLauncherFailed, message: launcherFailed(in), subject: api.LauncherRef()}
	case api.LauncherSucceeded:
		// The Launcher ran, so every Worker had been placed: Workers gone
		// now were stopped by the job's success (JobSet ends the others
		// before Trainer marks the job Complete), not waiting to be placed.
		return api.PhaseRunning, finding{reason: "", message: "The Launcher finished; Trainer is completing the job."}
	}
	if waiting := unscheduled(in.Workers); waiting > 0 || int32(len(in.Workers)) < s.WorkersTotal {
		if waiting == 0 {
			waiting = int(s.WorkersTotal) - len(in.Workers)
		}
		phase := api.PhasePending
		if placed := len(in.Workers) - unscheduled(in.Workers); placed > 0 {
			phase = api.PhaseGangScheduling
		}
		msg := fmt.Sprintf("Waiting for %s to be scheduled", api.Count(waiting, "Worker", "Workers"))
		sched := schedulerMessage(in.Workers)
		if m, next, ok := neverPlaced(in, sched); ok {
			return phase, finding{reason: ReasonCannotStart, message: m, next: next}
		}
		if m, next, ok := neverFits(in); ok {
			return phase, finding{reason: ReasonCannotStart, message: m, next: next}
		}
		// The scheduler's own words win when they name a constraint other
		// than free capacity (a taint, a node selector, affinity, a
		// volume): counting free resources would contradict it.
		if m, n, ok := volumeWait(in, sched); ok {
			return phase, finding{reason: ReasonUnschedulable, message: msg + ": " + m, next: n}
		}
		next := ranked(step("The job starts when capacity frees up; to start sooner use fewer Workers or smaller Workers."))
		why, fit := fitExplanation(in)
		switch {
		case constraint.MatchString(sched) && why != "" && fit == 0:
			// No node at all has the free capacity: true whatever else
			// the scheduler says about the other nodes.
			msg += ": " + why + " (scheduler: " + strings.TrimSuffix(sched, ".") + ")"
		case constraint.MatchString(sched):
			msg += ": " + strings.TrimSuffix(sched, ".")
			next = ranked(stepf("The scheduler names what keeps the Workers off the nodes (taints, node selectors, affinity, volumes): check them with `%s`; the job starts once enough nodes both match and have room.", cli("describe")))
		case why != "":
			msg += ": " + why
		case sched != "":
			msg += ": " + strings.TrimSuffix(sched, ".")
		}
		if in.Previous != nil && in.Previous.LastTransitionTime != nil && in.Previous.Phase == phase && in.GangTimeout > 0 &&
			in.Now.After(gangTimeoutAt(in.Previous.LastTransitionTime.Time, in.GangTimeout)) {
			return phase, finding{reason: ReasonGangSchedulingTimeout,
				message: msg + fmt.Sprintf(" (waiting longer than the gang-scheduling timeout of %s).", in.GangTimeout),
				next:    ranked(step("Use fewer Workers or fewer GPUs per worker, or ask an administrator for capacity; delete the job to free what it holds."))}
		}
		return phase, finding{reason: ReasonUnschedulable, message: msg + ".", next: next}
	}
	if s.WorkersReady < s.WorkersTotal {
		if msg, next, who, ok := sshdNotAnswering(in); ok {
			return api.PhaseStarting, finding{reason: ReasonSSHConnectionRefused, message: msg, next: next, subject: who}
		}
		for _, p := range sortedByIndex(in.Workers) {
			if msg, next, ok := sshdDidNotStart(p, in.WorkerImage); ok {
				return api.PhaseStarting, finding{reason: ReasonSSHConnectionRefused, message: msg, next: next, subject: workerRef(p)}
			}
		}
		if msg, next, who, ok := mountFailed(in); ok {
			return api.PhaseStarting, finding{reason: ReasonVolumeMountFailed, message: msg, next: next, subject: who}
		}
		return api.PhaseStarting, finding{reason: ReasonWorkersNotReady,
			message: fmt.Sprintf("Waiting for Workers to be Ready: %d of %d Ready.", s.WorkersReady, s.WorkersTotal),
			next:    ranked(stepf("Nothing to do yet; if this lasts, `%s` shows which Worker is not Ready and why.", cli("describe")))}
	}
	switch s.Launcher {
	case api.LauncherRunning, api.LauncherSucceeded:
		if s.Launcher == api.LauncherRunning {
			if m, n, who, ok := rankFailedOthersWaiting(in); ok {
				return api.PhaseRunning, finding{reason: ReasonRankFailedOthersWaiting, message: m, next: n, subject: who}
			}
			if m, n, who, ok := rankSilent(in); ok {
				return api.PhaseRunning, finding{reason: ReasonRankSilent, message: m, next: n, subject: who}
			}
		}
		if m, n, ok := launcherSilent(in, s); ok {
			// The Launcher's output is what stopped.
			return api.PhaseRunning, finding{reason: ReasonNoProgress, message: m, next: n, subject: api.LauncherRef()}
		}
		if m, n, who, ok := slowRank(in); ok && s.Launcher == api.LauncherRunning {
			return api.PhaseRunning, finding{reason: ReasonSlowRank, message: m, next: n, subject: who}
		}
		return api.PhaseRunning, finding{reason: "", message: fmt.Sprintf("Running on %d Workers.", s.WorkersTotal)}
	case api.LauncherFailed:
		return api.PhaseRunning, finding{reason: ReasonLauncherFailed, message: launcherFailed(in), subject: api.LauncherRef()}
	case api.LauncherDeleted:
		return api.PhaseRunning, finding{reason: ReasonLauncherDeleted, subject: api.LauncherRef(), message: "The Launcher pod was deleted while the Workers run.",
			next: ranked(stepf("The job cannot finish without its Launcher: delete it and resubmit (`%s`).", cli("clone")))}
	default:
		if sched := launcherUnschedulable(in); sched != "" {
			return api.PhaseStarting, finding{reason: ReasonUnschedulable,
				message: fmt.Sprintf("All Workers are Ready, but the Launcher cannot be scheduled: %s.", sched),
				next: ranked(launcherPlacementStep(sched),
					stepf("Delete the job while it waits (`%s`): its Workers hold their resources until the Launcher runs.", cli("delete")))}
		}
		return api.PhaseStarting, finding{reason: ReasonLauncherNotStarted, message: "All Workers are Ready; the Launcher is starting."}
	}
}

var quotaRe = regexp.MustCompile(`exceeded quota: ([^,]+), requested: ([^,]+), used: ([^,]+), limited: (.+)$`)

// quotaExceeded finds a pod creation that a ResourceQuota refused after the
// job was admitted (another job took the quota in between).
func quotaExceeded(events []corev1.Event) (reason, message string, next []api.Step, ok bool) {
	for _, e := range events {
		if e.Reason != "FailedCreate" || !strings.Contains(e.Message, "exceeded quota") {
			continue
		}
		msg := "Pods cannot be created: the namespace's ResourceQuota is used up."
		if m := quotaRe.FindStringSubmatch(e.Message); m != nil {
			msg = fmt.Sprintf("Pods cannot be created: ResourceQuota %s is used up (requested %s, in use %s, limit %s).",
				strings.TrimSpace(m[1]), m[2], m[3], strings.TrimSpace(m[4]))
		}
		return ReasonQuotaExceeded, msg,
			ranked(step("Wait for other jobs in the namespace to finish, delete some, or ask an administrator for a larger quota.")), true
	}
	return "", "", nil, false
}

var (
	// psaRefusal reads the Pod Security admission's refusal: `pods "x" is
	// forbidden: violates PodSecurity "restricted:latest": ...`.
	psaRefusal = regexp.MustCompile(`violates PodSecurity "([^":]+)(?::[^"]*)?": (.+)$`)
	// webhookRefusal reads another admission webhook's: `admission webhook
	// "x" denied the request: ...`.
	webhookRefusal = regexp.MustCompile(`admission webhook "([^"]+)" denied the request: (.+)$`)
)

// podsRefused finds pod creations that admission refuses for a reason no
// wait can change (Pod Security, a policy webhook, an invalid pod): the
// Job retries, the queue keeps the job's quota, and nothing ever runs.
func podsRefused(in Input) (reason, message string, next []api.Step, ok bool) {
	for _, e := range in.Events {
		if e.Reason != "FailedCreate" || e.InvolvedObject.Kind != "Job" || strings.Contains(e.Message, "exceeded quota") {
			continue
		}
		text := strings.TrimSpace(strings.TrimPrefix(e.Message, "Error creating: "))
		whose := "the Workers' pods"
		if in.TrainJob != nil && strings.HasPrefix(e.InvolvedObject.Name, in.TrainJob.Name+"-"+api.LauncherJob+"-") {
			whose = "the Launcher's pod"
		}
		ns := e.Namespace
		if ns == "" && in.TrainJob != nil {
			ns = in.TrainJob.Namespace
		}
		release := "Delete this job: a queue keeps its quota while it waits."
		if m := psaRefusal.FindStringSubmatch(text); m != nil {
			detail := strings.TrimSuffix(m[2], ".")
			return ReasonPodsRefused,
				fmt.Sprintf("The job can never start: namespace %s's Pod Security level %q refuses %s: %s.", ns, m[1], whose, detail),
				ranked(
					step(fmt.Sprintf("Remove from the job what Pod Security level %q forbids (%s): it comes from the job's runtimePatches or its runtime's pod template; then resubmit.", m[1], detail)),
					step(release),
					step("Or ask an administrator for a namespace whose Pod Security level allows it.")), true
		}
		if m := webhookRefusal.FindStringSubmatch(text); m != nil {
			return ReasonPodsRefused,
				fmt.Sprintf("The job can never start: admission webhook %s refuses %s: %s.", m[1], whose, strings.TrimSuffix(trimMessage(m[2], 300), ".")),
				ranked(step("Change the job as the webhook says, then resubmit."), step(release),
					step("Or ask an administrator about the policy behind webhook "+m[1]+".")), true
		}
		if strings.Contains(text, "forbidden") || strings.Contains(text, "Invalid value") || strings.Contains(text, "is invalid") {
			return ReasonPodsRefused,
				fmt.Sprintf("The job can never start: %s cannot be created: %s.", whose, strings.TrimSuffix(trimMessage(text, 400), ".")),
				ranked(step("Fix what the message names in the job (or its runtime), then resubmit."), step(release)), true
		}
	}
	return "", "", nil, false
}

// launcherFailed says what follows a failed Launcher: the job's end, or,
// with retries left (JobSet's failurePolicy.maxRestarts, the job's
// --retries), the whole job starting again.
func launcherFailed(in Input) string {
	if js := in.JobSet; js != nil && js.Spec.FailurePolicy != nil && js.Status.Restarts < js.Spec.FailurePolicy.MaxRestarts {
		tries := js.Spec.FailurePolicy.MaxRestarts + 1
		return fmt.Sprintf("The Launcher failed on try %d of %d; JobSet starts the whole job again (retries).", js.Status.Restarts+1, tries)
	}
	return "The Launcher failed; Trainer is finishing the job."
}

// BuilderComponent is the source of the Events the local cluster's image
// builder records on a pod whose image it builds for its first use
// (api.EventBuildingImage, then api.EventImageBuilt or
// api.EventImageBuildFailed).
const BuilderComponent = api.ImageBuilderComponent

// imageBuilding finds a pod that waits for an image the local cluster is
// building for its first use: its pull failed, and the builder's last word
// on the pod is BuildingImage. The job then waits (it starts at the
// kubelet's next pull after the import); it has not failed.
func imageBuilding(pods []*corev1.Pod, events []corev1.Event, now time.Time) (reason, message string, next []api.Step, ok bool) {
	for _, p := range pods {
		last := api.LastBuilderEvent(events, p.Name)
		if last == nil || (last.Reason != api.EventBuildingImage && last.Reason != api.EventImageBuilt) {
			continue
		}
		for cs := range containerStatuses(p) {
			if !api.PullFailed(cs) && (cs.State.Waiting == nil || cs.State.Waiting.Reason != "ContainerCreating") {
				continue
			}
			next := ranked(step("Nothing to do: the pods start once the image is imported; `make images` builds every image ahead of time."))
			if last.Reason == api.EventImageBuilt {
				// Built and imported: the kubelet pulls again at the end of
				// its back-off (at most 5 minutes).
				return ReasonImageBuilding,
					fmt.Sprintf("The local cluster built image %q for its first use: %s The pod starts at the kubelet's next pull retry.", cs.Image, last.Message), next, true
			}
			since := now.Sub(api.EventTime(*last)).Round(time.Second)
			return ReasonImageBuilding,
				fmt.Sprintf("The local cluster is building image %q for its first use (for %s so far): %s", cs.Image, since, last.Message), next, true
		}
	}
	return "", "", nil, false
}

// containerStatuses yields p's init containers' statuses, then its
// containers', without a list of copies of both.
func containerStatuses(p *corev1.Pod) iter.Seq[corev1.ContainerStatus] {
	return func(yield func(corev1.ContainerStatus) bool) {
		for _, list := range [2][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
			for _, cs := range list {
				if !yield(cs) {
					return
				}
			}
		}
	}
}

// imagePull finds a pod that cannot pull its image (pods sorted by index).
func imagePull(pods []*corev1.Pod) (reason, message string, next []api.Step, who *api.PodRef, ok bool) {
	for _, p := range pods {
		for cs := range containerStatuses(p) {
			if !api.PullFailed(cs) {
				continue
			}
			w := cs.State.Waiting
			name, ref := workerName(p), workerRef(p)
			if p.Labels["jobset.sigs.k8s.io/replicatedjob-name"] == api.LauncherJob {
				name, ref = "The Launcher (pod "+p.Name+")", api.LauncherRef()
			}
			msg := fmt.Sprintf("%s cannot pull image %q from %s (%s)", name, cs.Image, registryOf(cs.Image), w.Reason)
			if w.Message != "" {
				msg += ": " + trimMessage(w.Message, 300)
			}
			next := ranked(step("Check the image name and tag, that the registry is reachable from the nodes, and add an imagePullSecret for a private registry."))
			if strings.HasPrefix(cs.Image, "ghcr.io/mpijob/") {
				// One of mpijob's own MPI images, which no public registry
				// serves: the installation builds and pushes them.
				next = ranked(step("This is one of mpijob's MPI images, which are built from the repository, not pulled from ghcr.io: build and push them to your registry with `make images REGISTRY=registry.example.com/team`, then install with `kubectl apply --server-side -k config/registry` (docs/admin.md, Images from your registry)."))
			}
			if cudaImage(cs.Image) && runtimes.GPUsOf(&p.Spec) == "" {
				// A GPU runtime's CUDA image on a pod given no GPU (--gpus 0,
				// or a cluster without GPUs): it would run, slowly, on CPUs,
				// where a CPU image is a fraction of its size.
				next = append(next, step(fmt.Sprintf("%s is a CUDA image, and this pod asks for no GPU: give the Workers GPUs (kubectl mpijob create --gpus 1), or run on a CPU runtime such as mpi-openmpi, whose image needs no GPU.", cs.Image)))
			}
			return ReasonImagePullFailed, msg, next, ref, true
		}
	}
	return "", "", nil, nil, false
}

// cudaImage says whether an image's repository names CUDA
// (ghcr.io/mpijob/openmpi-cuda, nvcr.io/nvidia/cuda, pytorch/…-cuda12…).
func cudaImage(image string) bool {
	repo := image
	if i := strings.LastIndex(repo, "/"); i >= 0 {
		repo = repo[i+1:]
	}
	return strings.Contains(strings.ToLower(repo), "cuda")
}

// registryOf names the registry of an image reference ("docker.io" when none).
func registryOf(image string) string {
	first, _, found := strings.Cut(image, "/")
	if found && (strings.ContainsAny(first, ".:") || first == "localhost") {
		return first
	}
	return "docker.io"
}

func unscheduled(pods []corev1.Pod) int {
	n := 0
	for i := range pods {
		if pods[i].Spec.NodeName == "" && pods[i].Status.Phase == corev1.PodPending {
			n++
		}
	}
	return n
}

// launcherUnschedulable is the scheduler's word on a Launcher it could
// not place ("" while it is placed or not yet tried).
func launcherUnschedulable(in Input) string {
	if len(in.Launcher) == 0 {
		return ""
	}
	p := newest(in.Launcher)
	if p.Spec.NodeName != "" || p.Status.Phase != corev1.PodPending {
		return ""
	}
	return schedulerMessage([]corev1.Pod{*p})
}

// launcherPlacementStep is the first step for a Launcher the scheduler
// cannot place, by what the scheduler said: room (Insufficient cpu or
// memory), a taint, or a node selector or affinity.
func launcherPlacementStep(sched string) api.Step {
	lower := strings.ToLower(sched)
	switch {
	case strings.Contains(lower, "insufficient"):
		return stepf("No node has room for the Launcher now ("+strings.TrimSpace(insufficientOf(sched))+"): lower what it asks with --launcher-cpu or --launcher-memory (`%s`), or wait until running pods finish.", cli("clone", "--launcher-cpu", "100m"))
	case strings.Contains(lower, "taint"):
		return stepf("The nodes carry a taint the Launcher does not tolerate: add it with --toleration (`%s`), or ask an administrator which nodes take the Launcher.", cli("clone", "--toleration", "KEY=VALUE:NoSchedule"))
	case strings.Contains(lower, "affinity") || strings.Contains(lower, "selector"):
		return stepf("No node matches the Launcher's node selector or affinity: change --node-selector (`%s`), or ask an administrator which labels the nodes carry.", cli("clone", "--node-selector", "KEY=VALUE"))
	}
	return stepf("The scheduler names what keeps the Launcher off the nodes: give it the tolerations or node selector the nodes need, or ask an administrator; `%s` shows the Launcher pod.", cli("describe"))
}

// insufficientOf is the "Insufficient cpu, Insufficient memory" part of
// a scheduler message ("more room" when there is none to quote).
func insufficientOf(sched string) string {
	var parts []string
	for _, m := range insufficientRe.FindAllString(sched, -1) {
		if !slices.Contains(parts, m) {
			parts = append(parts, m)
		}
	}
	if len(parts) == 0 {
		return "it needs more room than any node has free"
	}
	return strings.Join(parts, ", ")
}

var insufficientRe = regexp.MustCompile(`Insufficient [A-Za-z0-9./-]+`)

// unschedulable counts the pods the scheduler tried and failed to place.
func unschedulable(pods []corev1.Pod) int {
	n := 0
	for i := range pods {
		for _, c := range pods[i].Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				n++
			}
		}
	}
	return n
}

// podCreationGrace is how long the Job controller may take to create pods
// before missing pods are looked into.
const podCreationGrace = 2 * time.Second

// workersMounting reports whether a Worker is placed on a node but has not
// started: the kubelet may be failing to mount its volumes.
func workersMounting(in Input) bool { return len(placedPending(in)) > 0 }

// placedPending are the Workers placed on a node that have not started,
// by name.
func placedPending(in Input) map[string]*corev1.Pod {
	out := map[string]*corev1.Pod{}
	for i := range in.Workers {
		if p := &in.Workers[i]; p.Spec.NodeName != "" && p.Status.Phase == corev1.PodPending {
			out[p.Name] = p
		}
	}
	return out
}

// mountFailed explains a Worker the kubelet cannot start because a volume
// does not mount (its FailedMount Event). The kubelet sizes a pod's
// in-memory volumes (the SSH key Secret Trainer mounts) by the pod's
// memory limit, so a limit of a few bytes fails with "no space left on
// device".
func mountFailed(in Input) (message string, next []api.Step, who *api.PodRef, ok bool) {
	pending := placedPending(in)
	var ev *corev1.Event
	for i := range in.Events {
		e := &in.Events[i]
		if e.Reason != "FailedMount" || e.InvolvedObject.Kind != "Pod" || pending[e.InvolvedObject.Name] == nil {
			continue
		}
		if ev == nil || e.LastTimestamp.After(ev.LastTimestamp.Time) {
			ev = e
		}
	}
	if ev == nil {
		return "", nil, nil, false
	}
	p := pending[ev.InvolvedObject.Name]
	msg := fmt.Sprintf("%s cannot start: a volume does not mount: %s.", capitalize(workerName(p)), strings.TrimSuffix(trimMessage(ev.Message, 300), "."))
	if strings.Contains(ev.Message, "no space left on device") {
		limit := "its memory limit"
		for _, c := range p.Spec.Containers {
			if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok && c.Name == api.NodeContainer {
				limit = fmt.Sprintf("its memory limit of %d bytes", q.Value())
				if q.Value() >= 1<<20 {
					limit = "its memory limit of " + q.String()
				}
			}
		}
		return msg, ranked(
			stepf("The kubelet sizes a pod's in-memory volumes (the SSH key Trainer mounts) by the pod's memory: "+limit+" is too small. Delete the job and run it again with more memory per Worker, e.g. %s (memory is in bytes unless it has a unit: Mi, Gi).", cli("clone", "--memory", "1Gi")),
			stepf("Until then the job holds its Workers: delete it (%s).", cli("delete"))), workerRef(p), true
	}
	return msg, ranked(
		stepf("Read the pod's Events (%s, or kubectl describe pod "+p.Name+"): a missing Secret, ConfigMap or PersistentVolumeClaim, or a volume another node holds, keeps it from starting.", cli("describe")),
		stepf("Fix the volume, or delete the job (%s): until then it holds its Workers.", cli("delete"))), workerRef(p), true
}

// podsOverdue reports whether the job's JobSet has existed for a while and
// still lacks the Launcher or some Workers.
func podsOverdue(in Input, now time.Time) bool {
	if in.JobSet == nil || now.Before(podsDueAt(in.JobSet.CreationTimestamp.Time)) {
		return false
	}
	return len(in.Launcher) == 0 || int32(len(in.Workers)) < workersTotal(in)
}

// gangTimeoutAt is when Workers waiting to be placed from waiting on pass
// the gang-scheduling timeout gang (explainUnfinished; untilRule looks
// then).
func gangTimeoutAt(waiting time.Time, gang time.Duration) time.Time { return waiting.Add(gang) }

// podsDueAt is when the pods of a JobSet made at created are overdue
// (podsOverdue; untilRule looks then).
func podsDueAt(created time.Time) time.Time { return created.Add(podCreationGrace) }

func schedulerMessage(pods []corev1.Pod) string {
	for i := range pods {
		for _, c := range pods[i].Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message != "" {
				return strings.TrimRight(trimMessage(c.Message, 300), ".")
			}
		}
	}
	return ""
}

// fitExplanation says how many nodes could take one more Worker, for the
// scarcest resource a waiting Worker asks for ("only 2 nodes have 3 free
// nvidia.com/gpu").
func fitExplanation(in Input) (string, int) {
	var waiting *corev1.Pod
	for i := range in.Workers {
		if in.Workers[i].Spec.NodeName == "" {
			waiting = &in.Workers[i]
			break
		}
	}
	if waiting == nil || len(in.Nodes) == 0 {
		return "", 0
	}
	for _, name := range []corev1.ResourceName{"nvidia.com/gpu", corev1.ResourceCPU, corev1.ResourceMemory} {
		want := requestOf(waiting, name)
		if want.IsZero() {
			continue
		}
		fit := 0
		for _, n := range in.Nodes {
			if free, ok := n.Free[name]; ok && free.Cmp(want) >= 0 {
				fit++
			}
		}
		if fit < unscheduled(in.Workers) {
			return fmt.Sprintf("only %s %s %s free %s", api.Count(fit, "node", "nodes"), api.Agree(fit, "has", "have"), want.String(), name), fit
		}
	}
	return "", 0
}

// constraint matches the scheduler's reasons that are not free capacity.
var constraint = regexp.MustCompile(`untolerated taint|didn't match Pod's node affinity/selector|didn't match pod anti-affinity rules|didn't match pod affinity rules|unbound immediate PersistentVolumeClaims|volume node affinity conflict|didn't have free ports`)

// antiAffinityNodes reads "N node(s) didn't match pod anti-affinity rules".
var antiAffinityNodes = regexp.MustCompile(`(\d+) node\(s\) didn't match pod anti-affinity rules`)

// neverPlaced says when the waiting Workers can never be placed, whatever
// frees up: the runtime's one-Worker-per-node rule with more Workers than
// the nodes that take Workers at all.
func neverPlaced(in Input, sched string) (message string, next []api.Step, ok bool) {
	m := antiAffinityNodes.FindStringSubmatch(sched)
	if m == nil || strings.Contains(sched, "Insufficient") {
		return "", nil, false
	}
	nodes, _ := strconv.Atoi(m[1])
	total := int(workersTotal(in))
	if nodes == 0 || total <= nodes {
		return "", nil, false
	}
	return fmt.Sprintf("The job can never start: it asks for %s, but the runtime places one Worker per node and only %s can take one (scheduler: %s).",
			api.Count(total, "Worker", "Workers"), api.Count(nodes, "node", "nodes"), sched),
		ranked(
			stepf(fmt.Sprintf("Use at most %d Workers with more slots per worker: %%s.", nodes), cli("clone", "--workers", strconv.Itoa(nodes), "--slots-per-worker", "N")),
			step("Delete this job: its placed Workers hold their resources while it waits."),
			step("Or ask an administrator for more nodes (or a runtime without the one-Worker-per-node rule).")), true
}

// workerLost finds a Worker that stopped while the Launcher runs: deleted,
// or evicted through the API (a node drain). sshd exits 0 on SIGTERM, so
// its Job counts the index as completed and never replaces it; MPI cannot
// go on without it. (Once the Launcher ran, every Worker had been Ready.)
func workerLost(in Input, total int32) (message string, next []api.Step, lost *api.PodRef, ok bool) {
	byIndex := map[string]*corev1.Pod{}
	for _, p := range sortedByIndex(in.Workers) {
		byIndex[p.Labels[completionIndexLabel]] = p
	}
	for i := 0; i < int(total); i++ {
		idx := strconv.Itoa(i)
		p := byIndex[idx]
		var who, how string
		switch {
		case p == nil:
			who, how = "Worker "+idx, "was deleted or evicted through the API (a node drain)"
			// The kubelet's "Killing" Event names the pod and its node.
			for _, e := range in.Events {
				if e.Reason == "Killing" && e.InvolvedObject.Kind == "Pod" && in.TrainJob != nil &&
					strings.HasPrefix(e.InvolvedObject.Name, in.TrainJob.Name+"-"+api.WorkerJob+"-0-"+idx+"-") {
					who = fmt.Sprintf("Worker %s (pod %s", idx, e.InvolvedObject.Name)
					if e.Source.Host != "" {
						who += " on node " + e.Source.Host
					}
					who += ")"
				}
			}
		case p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || (p.Status.Phase == corev1.PodFailed && disrupted(p)):
			who, how = workerName(p), "was deleted"
			if p.Spec.NodeName != "" {
				who = strings.TrimSuffix(who, ")") + " on node " + p.Spec.NodeName + ")"
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
					switch c.Reason {
					case "EvictionByEvictionAPI":
						how = "was evicted through the API (a node drain)"
					case "PreemptionByScheduler":
						how = "was preempted by a higher-priority pod"
					case "DeletionByTaintManager":
						how = "was removed from its node by a NoExecute taint"
					case "TerminationByKubelet":
						how = "was stopped by its node's kubelet (node shutdown or pressure)"
					default:
						how = "was disrupted (" + c.Reason + ")"
					}
				}
			}
			if p.Status.Reason == "Evicted" {
				how = "was evicted by its node: " + trimMessage(p.Status.Message, 200)
			}
		default:
			continue
		}
		return fmt.Sprintf("%s %s while the Launcher ran: MPI cannot go on without it, and its Job does not replace a Worker that stopped cleanly.", capitalize(who), how),
			ranked(
				stepf("Resubmit the job (`%s`); delete this one, its Launcher and other Workers hold their resources until mpirun gives up.", cli("clone")),
				step("Ask an administrator to drain nodes only when no MPI job runs there, or to protect running Workers with a PodDisruptionBudget.")), api.WorkerRef(int32(i)), true
	}
	return "", nil, nil, false
}

// disrupted reports a pod the control plane stopped (an eviction, a
// preemption, a taint) rather than one whose program failed.
func disrupted(p *corev1.Pod) bool {
	if p.Status.Reason == "Evicted" {
		return true
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// launcherSilent says when a running Launcher has printed nothing for longer
// than the job's progress timeout: a program stuck in a collective, or
// MPI stuck in finalize after every rank printed its last line (MPICH over
// UCX). The job keeps running; the evidence is the last line and its time.
func launcherSilent(in Input, s api.Status) (message string, next []api.Step, ok bool) {
	if in.ProgressTimeout <= 0 || s.Launcher != api.LauncherRunning {
		return "", nil, false
	}
	since := QuietSince(in, s)
	if since == nil || in.Now.Sub(*since) <= in.ProgressTimeout {
		return "", nil, false
	}
	// The message names when the output stopped, not for how long: a
	// duration would change at every look and rewrite the status (a
	// TrainJob update through Trainer's and Kueue's webhooks) every minute
	// while the job stays quiet, for a figure every reader can work out.
	at := since.UTC().Format(time.RFC3339)
	msg := fmt.Sprintf("The Launcher has printed nothing since it started, at %s, longer than the job's progress timeout of %s; the job keeps running.", at, in.ProgressTimeout)
	switch {
	case in.LastOutput != nil && in.LastLine != "":
		msg = fmt.Sprintf("The Launcher has printed nothing since %s, longer than the job's progress timeout of %s; its last line: %q. The job keeps running.",
			at, in.ProgressTimeout, trimMessage(in.LastLine, 200))
	case in.LastOutput != nil:
		msg = fmt.Sprintf("The Launcher has printed nothing since %s, longer than the job's progress timeout of %s; the job keeps running.", at, in.ProgressTimeout)
	}
	return msg, ranked(
		stepf("Look at every rank's last output (`%s`): ranks that all finished but a Launcher that does not exit is MPI stuck in finalize; ranks that stop mid-way are stuck in a collective or waiting on a peer (kubectl mpijob stacks on the job shows where each rank waits now).", cli("logs", "--all")),
		stepf("If it is stuck, delete the job and resubmit (`%s`); it holds its Workers until then.", cli("clone")),
		step("If the program is only quiet, print progress more often or raise "+`policy.mpijob.dev/progress-timeout`+" on the job.")), true
}

var (
	unboundClaims = regexp.MustCompile(`unbound immediate PersistentVolumeClaims`)
	missingClaim  = regexp.MustCompile(`persistentvolumeclaim "([^"]+)" not found`)
)

// volumeWait explains Workers that wait for a PersistentVolumeClaim: one
// not bound to a volume yet, or one that does not exist.
func volumeWait(in Input, sched string) (message string, next []api.Step, ok bool) {
	ns := ""
	if in.TrainJob != nil {
		ns = in.TrainJob.Namespace
	}
	if m := missingClaim.FindStringSubmatch(sched); m != nil {
		return fmt.Sprintf("their PersistentVolumeClaim %s does not exist in namespace %s (scheduler: %s).", m[1], ns, sched),
			ranked(
				step(fmt.Sprintf("Create PersistentVolumeClaim %s in namespace %s: the job starts once it is bound.", m[1], ns)),
				stepf("Or fix the claim's name in the job's volumes and resubmit (`%s`).", cli("clone"))), true
	}
	if !unboundClaims.MatchString(sched) {
		return "", nil, false
	}
	var claims []string
	for _, p := range sortedByIndex(in.Workers) {
		if p.Spec.NodeName != "" {
			continue
		}
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim != nil {
				claims = append(claims, v.PersistentVolumeClaim.ClaimName)
			}
		}
		break
	}
	what := "their PersistentVolumeClaims are"
	check := "kubectl get pvc -n " + ns
	if len(claims) == 1 {
		what = "their PersistentVolumeClaim " + claims[0] + " is"
		check = "kubectl get pvc " + claims[0] + " -n " + ns
	} else if len(claims) > 1 {
		what = "their PersistentVolumeClaims " + strings.Join(claims, ", ") + " are"
	}
	return fmt.Sprintf("%s not bound to a volume yet (scheduler: %s).", what, sched),
		ranked(
			step(fmt.Sprintf("Check the claim (`%s`): it needs a StorageClass that provisions volumes or a PersistentVolume that matches it; the job starts once it is Bound.", check)),
			step("A claim with ReadWriteOnce can be used by the Workers of one node only: use ReadWriteMany for Workers on several nodes.")), true
}

// QuietSince is when the running Launcher last printed, or started when it
// has printed nothing yet (nil when neither is known).
func QuietSince(in Input, s api.Status) *time.Time {
	if in.LastOutput != nil {
		return in.LastOutput
	}
	if s.StartTime != nil {
		return &s.StartTime.Time
	}
	return nil
}

// deadlineReached says whether a job whose pods had started has run past
// its timeout (spec.activeDeadlineSeconds, counted here from its creation,
// which is no later than Trainer's start).
func deadlineReached(in Input) bool {
	tj, p := in.TrainJob, in.Previous
	if tj == nil || tj.Spec.ActiveDeadlineSeconds <= 0 || p == nil || (p.Phase != api.PhaseStarting && p.Phase != api.PhaseRunning) {
		return false
	}
	return !in.Now.Before(deadlineAt(tj))
}

// deadlineAt is when a job with a timeout (spec.activeDeadlineSeconds > 0)
// reaches it, counted from its creation (deadlineReached; untilRule looks
// then).
func deadlineAt(tj *trainer.TrainJob) time.Time {
	return tj.CreationTimestamp.Add(time.Duration(tj.Spec.ActiveDeadlineSeconds) * time.Second)
}

// previousSteps are the next steps of the status before (one written
// before steps were data has their texts alone).
func previousSteps(p *api.Status) []api.Step {
	if len(p.Steps) > 0 {
		return p.Steps
	}
	if len(p.NextSteps) > 0 {
		out := make([]api.Step, len(p.NextSteps))
		for i, t := range p.NextSteps {
			out[i] = step(t)
		}
		return out
	}
	if p.NextStep != "" {
		return ranked(step(p.NextStep))
	}
	return nil
}
