package diagnose

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/jobspec"
	"github.com/mpijob/mpijob/pkg/logs"
)

// logRule translates one kind of MPI error in the Launcher's log.
type logRule struct {
	re      *regexp.Regexp
	explain func(m []string, in Input) finding
}

// logRules are tried in order; the first match explains the failure. They
// cover OpenMPI (mpirun/ORTE/PRTE), MPICH/Intel MPI (Hydra) and ssh.
var logRules = []logRule{
	{
		re: regexp.MustCompile(`(?m)ssh: connect to host (\S+) port (\d+): Connection refused`),
		explain: func(m []string, in Input) finding {
			return finding{reason: ReasonSSHConnectionRefused,
				message: fmt.Sprintf("The Launcher could not open an SSH connection to %s on port %s: the connection was refused.", workerHost(m[1]), m[2]),
				next:    ranked(step("Check that the Worker image" + named(in.WorkerImage) + " starts sshd on port " + m[2] + " (the runtime's Worker command) and that no NetworkPolicy blocks traffic between the job's pods.")), subject: hostRef(m[1])}
		},
	},
	{
		re: regexp.MustCompile(`(?m)ssh: (?:connect to host (\S+) port \d+: (?:No route to host|Connection timed out)|Could not resolve hostname (\S+?):)`),
		explain: func(m []string, in Input) finding {
			host := m[1]
			if host == "" {
				host = m[2]
			}
			return finding{reason: ReasonHostUnreachable,
				message: fmt.Sprintf("The Launcher could not reach %s: the host did not resolve or did not answer.", workerHost(host)),
				next:    ranked(step("Check that cluster DNS works and that the Worker pods are Running; a NetworkPolicy may block the job's pods from each other.")), subject: hostRef(host)}
		},
	},
	{
		re: regexp.MustCompile(`(?m)process rank (\d+) with PID \d+ on node (\S+) exited on signal 9`),
		explain: func(m []string, in Input) finding {
			return finding{reason: ReasonRankKilled,
				message: fmt.Sprintf("Rank %s on %s was killed (signal 9), most likely because it ran out of memory and the system stopped it to protect the node.", m[1], workerHost(m[2])),
				next:    ranked(stepf("Give each Worker more memory or run fewer slots per worker; `%s` shows each Worker's memory limit.", cli("describe"))), subject: hostRef(m[2])}
		},
	},
	{
		re: regexp.MustCompile(`(?m)process rank (\d+) with PID \d+ on node (\S+) exited on signal (\d+)(?: \(([^)]+)\))?`),
		explain: func(m []string, in Input) finding {
			sig := m[3]
			if m[4] != "" {
				sig += " (" + m[4] + ")"
			}
			return finding{reason: ReasonRankSignaled,
				message: fmt.Sprintf("Rank %s on %s crashed on signal %s.", m[1], workerHost(m[2]), sig),
				next:    ranked(stepf("Read the Launcher log around the crash (`%s`); signal 11 is a segmentation fault in the program.", cli("logs", "--all"))), subject: hostRef(m[2])}
		},
	},
	{
		re: regexp.MustCompile(`(?m)(?:ORTE|PRTE) (?:was unable to reliably start one or more daemons|has lost communication with a remote daemon)`),
		explain: func([]string, Input) finding {
			return finding{reason: ReasonHostUnreachable,
				message: "mpirun could not start or keep its daemons on the Workers over SSH.",
				next:    ranked(step("Check the Worker pods are Running and Ready and that sshd accepts the job's key; then resubmit the job."))}
		},
	},
}

// workerHost turns a hostfile name (job-node-0-3.job or its FQDN) into
// "Worker 3 (job-node-0-3)" when it follows Trainer's naming.
var hostIndex = regexp.MustCompile(`^(\S+)-node-\d+-(\d+)(?:\..*)?$`)

// hostRef is the Worker a hostfile name names (nil: not a Worker's).
func hostRef(h string) *api.PodRef {
	if m := hostIndex.FindStringSubmatch(h); m != nil {
		if i, err := strconv.Atoi(m[2]); err == nil {
			return api.WorkerRef(int32(i))
		}
	}
	return nil
}

func workerHost(h string) string {
	if m := hostIndex.FindStringSubmatch(h); m != nil {
		short := strings.SplitN(h, ".", 2)[0]
		return fmt.Sprintf("Worker %s (%s)", m[2], short)
	}
	return "host " + h
}

// deadlineNext is what to do about a job that reached its timeout.
func deadlineNext() []api.Step {
	return ranked(
		stepf("Give the job a longer timeout: `%s`.", cli("clone", "--timeout", "2h")),
		stepf("Or find out why it is slow: `%s`.", cli("logs", "--all")))
}

// timeoutOf names tj's timeout: "timeout of 10m (spec.activeDeadlineSeconds 600)".
func timeoutOf(tj *trainer.TrainJob) string {
	return fmt.Sprintf("timeout of %s (spec.activeDeadlineSeconds %d)", jobspec.FormatTimeout(tj.Spec.ActiveDeadlineSeconds), tj.Spec.ActiveDeadlineSeconds)
}

// explainFailure says why a failed job failed, most specific cause first.
func explainFailure(in Input) finding {
	tj := in.TrainJob
	if c := cond(tj, trainer.TrainJobFailed); c != nil && c.Reason == trainer.TrainJobDeadlineExceededReason {
		return finding{reason: ReasonDeadlineExceeded, message: fmt.Sprintf("The job ran longer than its %s and was stopped.", timeoutOf(tj)), next: deadlineNext()}
	}
	// A Worker lost while the Launcher ran is why mpirun then failed.
	if in.Previous != nil && in.Previous.Phase == api.PhaseRunning && in.Previous.Reason == ReasonWorkerEvicted {
		return finding{reason: ReasonWorkerEvicted, message: in.Previous.Message, next: ranked(
			stepf("Resubmit the job (`%s`).", cli("clone")),
			step("Ask an administrator to drain nodes only when no MPI job runs there, or to protect running Workers with a PodDisruptionBudget.")), subject: in.Previous.Subject}
	}
	for _, p := range sortedByIndex(in.Workers) {
		if r, m, n, ok := podFailure(p, workerName(p), ReasonWorkerOOMKilled, ReasonWorkerEvicted); ok {
			return finding{reason: r, message: m, next: n, subject: workerRef(p)}
		}
		if m, n, ok := sshdDidNotStart(p, in.WorkerImage); ok {
			return finding{reason: ReasonSSHConnectionRefused, message: m, next: n, subject: workerRef(p)}
		}
	}
	if m, n, who, ok := sshdMissingFromEvents(in); ok {
		return finding{reason: ReasonSSHConnectionRefused, message: m, next: n, subject: who}
	}
	for i := range in.Launcher {
		if r, m, n, ok := podFailure(&in.Launcher[i], "the Launcher (pod "+in.Launcher[i].Name+")", ReasonLauncherOOMKilled, ReasonWorkerEvicted); ok {
			return finding{reason: r, message: m, next: n, subject: api.LauncherRef()}
		}
	}
	if f, ok := launcherInitFailed(in); ok {
		return f
	}
	// The rules read the program's and mpirun's words: rank tags out.
	text := logs.StripRanks(in.LauncherLog)
	for _, rules := range [][]logRule{limitRules, programRules, logRules, rankFailedRules} {
		for _, rule := range rules {
			if m := rule.re.FindStringSubmatch(text); m != nil {
				return rule.explain(m, in)
			}
		}
	}
	if launcherState(in) == api.LauncherDeleted || launcherWasDeleted(in) {
		return finding{reason: ReasonLauncherDeleted,
			message: "The Launcher pod was deleted while the Workers ran, so the job could not finish.",
			next:    ranked(stepf("Resubmit the job (`%s`); do not delete the Launcher pod of a running job.", cli("clone"))), subject: api.LauncherRef()}
	}
	if r, m, n, ok := launcherKilled(in); ok {
		return finding{reason: r, message: m, next: n, subject: api.LauncherRef()}
	}
	if code, ok := launcherExitCode(in.Launcher); ok {
		msg := fmt.Sprintf("The Launcher exited with code %d.", code)
		// Intel MPI's mpiexec exits without a word about the ranks that
		// failed: what they printed last says why.
		if last := lastWords(in.LauncherLog, ""); last != "" {
			msg += fmt.Sprintf(" The last output: %q.", last)
		}
		return finding{reason: ReasonLauncherFailed, message: msg,
			next: ranked(stepf("Read the Launcher log (`%s`) for the program's own error.", cli("logs"))), subject: api.LauncherRef()}
	}
	msg := "The job failed."
	if c := cond(tj, trainer.TrainJobFailed); c != nil && c.Message != "" {
		msg = "The job failed: " + trimMessage(c.Message, 400)
	}
	return finding{reason: ReasonFailed, message: msg, next: ranked(stepf("Read the events (`%s`) and the Launcher log.", cli("events")))}
}

// podFailure explains an OOM kill or an eviction of one pod.
func podFailure(p *corev1.Pod, who, oomReason, evictReason string) (reason, message string, next []api.Step, ok bool) {
	if p.Status.Reason == "Evicted" && strings.Contains(p.Status.Message, "ephemeral local storage") && strings.Contains(p.Status.Message, "limit") {
		return evictReason,
			fmt.Sprintf("%s was evicted from node %s: it wrote more than its ephemeral-storage limit allows (its log and what it writes to its own file system count): %s",
				capitalize(who), p.Spec.NodeName, trimMessage(p.Status.Message, 300)),
			ranked(step("Write large files to a PVC (--pvc) or the job's artifacts instead of the container's own file system, and log less; " +
				"or ask your administrator for a higher ephemeral-storage limit (the namespace's LimitRange).")), true
	}
	if p.Status.Reason == "Evicted" {
		return evictReason,
			fmt.Sprintf("%s was evicted from node %s: %s", capitalize(who), p.Spec.NodeName, trimMessage(p.Status.Message, 300)),
			ranked(step("The node ran short of a resource; set requests for memory and ephemeral storage that cover what the job uses, then resubmit.")), true
	}
	for _, cs := range p.Status.ContainerStatuses {
		for _, t := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
			if t == nil || t.Reason != "OOMKilled" {
				continue
			}
			limit := memoryLimit(p, cs.Name)
			msg := fmt.Sprintf("%s ran out of memory and was killed (exit code %d, OOMKilled)", capitalize(who), t.ExitCode)
			if limit != "" {
				msg += fmt.Sprintf(": its memory limit is %s.", limit)
			} else {
				msg += ": it has no memory limit, so the node itself ran out."
			}
			next := ranked(step("Give each Worker more memory (a higher memory limit per worker) or run fewer slots per worker."))
			if oomReason == ReasonLauncherOOMKilled {
				next = ranked(step("Give the Launcher more memory (a higher launcher memory limit)."))
			}
			return oomReason, msg, next, true
		}
	}
	return "", "", nil, false
}

func launcherExitCode(pods []corev1.Pod) (int32, bool) {
	if _, t := failedLauncher(pods); t != nil {
		return t.ExitCode, true
	}
	return 0, false
}

// failedLauncher is the first Launcher pod whose container ended non-zero,
// with how it ended.
func failedLauncher(pods []corev1.Pod) (*corev1.Pod, *corev1.ContainerStateTerminated) {
	for i := range pods {
		for _, cs := range pods[i].Status.ContainerStatuses {
			if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
				return &pods[i], t
			}
		}
	}
	return nil, nil
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// launcherWasDeleted reports whether the Launcher was seen being deleted
// before the job failed: its failed pod (exit 137 or 143) then says less
// than that.
func launcherWasDeleted(in Input) bool {
	if in.Previous != nil && (in.Previous.Launcher == api.LauncherDeleted || in.Previous.Reason == ReasonLauncherDeleted) {
		return true
	}
	for i := range in.Launcher {
		if in.Launcher[i].DeletionTimestamp != nil {
			return true
		}
	}
	return false
}

// named quotes an image for a sentence, or gives nothing when unknown.
func named(image string) string {
	if image == "" {
		return ""
	}
	return " " + image
}

// sshdDidNotStart explains a Worker whose node container could not start
// its command (sshd): an image without it.
func sshdDidNotStart(p *corev1.Pod, image string) (message string, next []api.Step, ok bool) {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name != api.NodeContainer {
			continue
		}
		for _, t := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
			if t == nil || (t.Reason != "StartError" && t.Reason != "ContainerCannotRun" && t.ExitCode != 127) {
				continue
			}
			if image == "" {
				image = cs.Image
			}
			what := "its command"
			if cmd := nodeCommand(p); cmd != "" {
				what = cmd
			}
			return fmt.Sprintf("%s could not start %s, so no SSH server answers the Launcher: image %s lacks it (%s).",
					capitalize(workerName(p)), what, image, trimMessage(firstNonEmpty(t.Message, t.Reason), 200)),
				ranked(step("Use a Worker image with sshd (build it FROM the runtime's image, see docs/runtimes.md#images), or keep the runtime's Worker image and put your own image on the Launcher only (--launcher-image).")), true
		}
	}
	return "", nil, false
}

// sshdNotAnswering explains a Worker that runs but whose readiness probe
// (the SSH port) fails for longer than sshd needs to start.
func sshdNotAnswering(in Input) (message string, next []api.Step, who *api.PodRef, ok bool) {
	for _, p := range sortedByIndex(in.Workers) {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name != api.NodeContainer || cs.Ready || cs.State.Running == nil || in.Now.Sub(cs.State.Running.StartedAt.Time) < sshdStartGrace {
				continue
			}
			port := ""
			for _, c := range p.Spec.Containers {
				if c.Name == cs.Name && c.ReadinessProbe != nil && c.ReadinessProbe.TCPSocket != nil {
					port = c.ReadinessProbe.TCPSocket.Port.String()
				}
			}
			if port == "" {
				continue
			}
			image := in.WorkerImage
			if image == "" {
				image = cs.Image
			}
			return fmt.Sprintf("%s runs but nothing answers SSH on port %s (its readiness probe is refused), so the Launcher cannot start: image %s may lack sshd or run it on another port.",
					capitalize(workerName(p)), port, image),
				ranked(stepf("Use a Worker image whose sshd listens on port "+port+" (build it FROM the runtime's image, see docs/runtimes.md#images); `%s` shows what a Worker printed.", cli("logs", "--worker", "N"))), workerRef(p), true
		}
	}
	return "", nil, nil, false
}

// sshdStartGrace is how long a running Worker may take to answer SSH.
const sshdStartGrace = 20 * time.Second

func nodeCommand(p *corev1.Pod) string {
	for _, c := range p.Spec.Containers {
		if c.Name == api.NodeContainer && len(c.Command) > 0 {
			return c.Command[0]
		}
	}
	return ""
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// goneWorkerPodRe reads a Worker's index from its pod's name
// (<job>-node-<job index>-<pod index>-<suffix>, JobSet's naming).
var goneWorkerPodRe = regexp.MustCompile(`^-` + api.WorkerJob + `-\d+-(\d+)-[a-z0-9]{5}$`)

// goneWorkerName names a Worker whose pod is gone as a live one is named
// ("Worker 0 (pod …)"), its index read from the pod's name, so a message
// does not change wording when the pod goes; and its PodRef (nil: no
// index in the name).
func goneWorkerName(job *trainer.TrainJob, pod string) (string, *api.PodRef) {
	if job != nil {
		if rest, ok := strings.CutPrefix(pod, job.Name); ok {
			if m := goneWorkerPodRe.FindStringSubmatch(rest); m != nil {
				i, _ := strconv.Atoi(m[1]) // digits: the pattern's
				return fmt.Sprintf("Worker %s (pod %s)", m[1], pod), api.WorkerRef(int32(i))
			}
		}
	}
	return "Worker pod " + pod, nil
}

var startFailedRe = regexp.MustCompile(`exec: "([^"]+)": (?:stat \S+: )?(no such file or directory|executable file not found in \$PATH)`)

// sshdMissingFromEvents explains a Worker whose command could not start,
// from its pod's Warning Event, once the pod itself is gone.
func sshdMissingFromEvents(in Input) (message string, next []api.Step, who *api.PodRef, ok bool) {
	for _, e := range in.Events {
		if e.InvolvedObject.Kind != "Pod" || e.Type != corev1.EventTypeWarning {
			continue
		}
		m := startFailedRe.FindStringSubmatch(e.Message)
		if m == nil {
			continue
		}
		image := in.WorkerImage
		if image == "" {
			image = "of the Workers"
		}
		name, ref := goneWorkerName(in.TrainJob, e.InvolvedObject.Name)
		return fmt.Sprintf("%s could not start %s, so no SSH server answers the Launcher: image %s lacks it (%s).", name, m[1], image, m[2]),
			ranked(step("Use a Worker image with sshd (build it FROM the runtime's image, see docs/runtimes.md#images), or keep the runtime's Worker image and put your own image on the Launcher only (--launcher-image).")), ref, true
	}
	return "", nil, nil, false
}

// systemOOM reads the kubelet's "System OOM encountered, victim process:
// mpirun, pid: 4242" Node Event.
var systemOOM = regexp.MustCompile(`victim process: ([^,]+)`)

// nodeEventTrusted tells a Node's Event the kubelet recorded: in the
// default namespace (where Events about cluster-scoped objects go, and
// which tenants cannot write) from the kubelet. An Event a tenant made in
// its own namespace about a node is none of the node's.
func nodeEventTrusted(e corev1.Event) bool {
	return e.Namespace == metav1.NamespaceDefault && (e.Source.Component == "kubelet" || e.ReportingController == "kubelet")
}

// launcherKilled explains a Launcher killed with SIGKILL (exit 137) that
// its container runtime did not call OOMKilled: the node's own
// out-of-memory killer (the kubelet then records a SystemOOM Event on the
// Node), or a kill from outside.
func launcherKilled(in Input) (reason, message string, next []api.Step, ok bool) {
	p, t := failedLauncher(in.Launcher)
	if p == nil || t.ExitCode != 137 {
		return "", "", nil, false
	}
	finished := t.FinishedAt.Time
	for _, e := range in.Events {
		if e.Reason != "SystemOOM" || e.InvolvedObject.Kind != "Node" || e.InvolvedObject.Name != p.Spec.NodeName || !nodeEventTrusted(e) {
			continue
		}
		at := api.EventTime(e)
		if !finished.IsZero() && (at.Before(finished.Add(-2*time.Minute)) || at.After(finished.Add(time.Minute))) {
			continue
		}
		victim := "a process"
		if m := systemOOM.FindStringSubmatch(e.Message); m != nil {
			victim = "process " + strings.TrimSpace(m[1])
		}
		limit := memoryLimit(p, api.NodeContainer)
		msg := fmt.Sprintf("The Launcher (pod %s) was killed (exit code 137) when node %s ran out of memory: the node's out-of-memory killer chose %s.", p.Name, p.Spec.NodeName, victim)
		if limit == "" {
			msg += " The Launcher has no memory limit, so what it uses is not reserved for it."
		}
		return ReasonLauncherOOMKilled, msg, ranked(
			step("Set the Launcher's memory request and limit to what it uses (--launcher-memory), so the scheduler reserves it."),
			step("Ask an administrator which pods on node "+p.Spec.NodeName+" use more memory than they request."),
			stepf("Resubmit the job (`%s`).", cli("clone"))), true
	}
	return ReasonLauncherFailed,
		fmt.Sprintf("The Launcher (pod %s) was killed with SIGKILL (exit code 137) without a container memory limit being hit: the node's out-of-memory killer or a process outside the job stopped it.", p.Name),
		ranked(
			step("Set the Launcher's memory request and limit to what it uses (--launcher-memory), so the scheduler reserves it."),
			step("Ask an administrator whether node "+p.Spec.NodeName+" ran out of memory (its SystemOOM events)."),
			stepf("Read the Launcher log (`%s`) for what it did last.", cli("logs")),
			stepf("Resubmit the job (`%s`).", cli("clone"))), true
}

// workerDidNotAnswer is the runtimes' wait-for-workers step giving up:
// "Worker HOST: sshd on port 2222 did not answer the Launcher within 120 s".
var workerDidNotAnswer = regexp.MustCompile(`Worker (\S+?): sshd on port (\d+) did not answer the Launcher within (\d+ s)`)

// launcherInitFailed explains a Launcher whose init container failed, so
// mpirun never started (its main container's log is empty: "waiting to
// start: PodInitializing"): the container's termination message (its log's
// last words, FallbackToLogsOnError) says why.
func launcherInitFailed(in Input) (finding, bool) {
	for _, p := range in.Launcher {
		for _, cs := range p.Status.InitContainerStatuses {
			t := cs.State.Terminated
			if t == nil || t.ExitCode == 0 {
				continue
			}
			said := strings.TrimSpace(t.Message)
			if m := workerDidNotAnswer.FindStringSubmatch(said); m != nil {
				host := strings.SplitN(m[1], ".", 2)[0]
				who := "Worker " + host
				var subject *api.PodRef
				if i := strings.LastIndex(host, "-"); i > 0 {
					if n, err := strconv.Atoi(host[i+1:]); err == nil {
						who = fmt.Sprintf("Worker %d (%s)", n, host)
						subject = api.WorkerRef(int32(n))
					}
				}
				return finding{reason: ReasonHostUnreachable,
					message: fmt.Sprintf("The Launcher gave up before mpirun started: %s did not answer on port %s within %s (the Launcher's %s step), so the job failed.", who, m[2], m[3], cs.Name),
					next: ranked(
						stepf("Check that every Worker runs and is Ready (`%s`): a Worker on a simulated node, such as the local cluster's kwok GPU nodes, runs no container, so nothing ever answers; run GPU jobs where the nodes have real GPUs, or on CPUs (`--runtime mpi-openmpi --gpus 0`).", cli("describe")),
						step("Check that no NetworkPolicy of the namespace blocks port "+m[2]+" between the job's pods, and that the Worker image runs sshd on it.")),
					subject: subject}, true
			}
			msg := fmt.Sprintf("The Launcher's %s step exited with code %d before mpirun started, so the job failed.", cs.Name, t.ExitCode)
			if said != "" {
				msg += fmt.Sprintf(" It said: %q.", trimMessage(lastWords(said, ""), 300))
			}
			return finding{reason: ReasonLauncherFailed, message: msg,
				next: ranked(stepf("Read its output (`%s`) and fix what it waits for.", cli("logs"))), subject: api.LauncherRef()}, true
		}
	}
	return finding{}, false
}
