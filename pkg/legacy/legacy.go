// Package legacy turns a legacy kubeflow.org/v2beta1 MPIJob into a
// TrainJob on one of mpijob's runtimes. What the legacy pod templates carry
// goes where a namespace editor may put it: images and resources into the
// job's own namespaced TrainingRuntime (the per-job runtime of
// pkg/jobspec, derived from the shipped runtime), volumes, environment,
// scheduling and the service account into the TrainJob's runtimePatches.
// No cluster administrator is needed. Every legacy field is reported as
// mapped, changed or dropped, with the reason.
package legacy

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	mpiv2 "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v2beta1"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/mpijob/mpijob/config"
	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/jobspec"
	"github.com/mpijob/mpijob/pkg/queue"
	"github.com/mpijob/mpijob/pkg/runtimes"
)

// Action says what became of a legacy field.
type Action string

// What became of a legacy field.
const (
	// Mapped: the field has a direct equivalent.
	Mapped Action = "mapped"
	// Changed: it maps, with a different meaning or place.
	Changed Action = "changed"
	// Dropped: TrainJobs have no equivalent.
	Dropped Action = "dropped"
)

// Note is one line of the report.
type Note struct {
	Field  string `json:"field"`
	Action Action `json:"action"`
	Detail string `json:"detail"`
}

// Result is a converted job.
type Result struct {
	TrainJob *trainer.TrainJob `json:"trainJob"`
	// Runtime is the job's own TrainingRuntime (created before the
	// TrainJob, in its namespace); nil when the job fits a shipped runtime
	// as is.
	Runtime *trainer.TrainingRuntime `json:"runtime,omitempty"`
	Notes   []Note                   `json:"notes"`
}

// Error is a legacy manifest that cannot be converted; Field names where.
type Error struct {
	Field, Problem, Fix string
}

func (e *Error) Error() string {
	s := e.Field + ": " + e.Problem
	if e.Fix != "" {
		s += "; " + e.Fix
	}
	return s
}

const legacyAPIVersion = "kubeflow.org/v2beta1"

// PatchManager owns the runtime patch that carries the legacy pod
// templates' volumes, environment and scheduling.
const PatchManager = "mpijob.dev/convert"

// Convert reads one legacy MPIJob manifest (YAML or JSON).
func Convert(data []byte) (*Result, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil, &Error{Field: "input", Problem: "is empty", Fix: "give a kubeflow.org/v2beta1 MPIJob manifest"}
	}
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(data, &head); err != nil {
		return nil, &Error{Field: "input", Problem: "is not YAML or JSON: " + firstLine(err.Error())}
	}
	if head.Kind != "MPIJob" {
		return nil, &Error{Field: "kind", Problem: fmt.Sprintf("is %q", head.Kind), Fix: "convert takes kind MPIJob (kubeflow.org/v2beta1)"}
	}
	if head.APIVersion != legacyAPIVersion {
		fix := "only kubeflow.org/v2beta1 converts; move a v1 MPIJob to v2beta1 first (mpi-operator docs)"
		return nil, &Error{Field: "apiVersion", Problem: fmt.Sprintf("is %q", head.APIVersion), Fix: fix}
	}
	job := &mpiv2.MPIJob{}
	if err := yaml.Unmarshal(data, job); err != nil {
		return nil, &Error{Field: "spec", Problem: "does not match the MPIJob schema: " + firstLine(err.Error())}
	}
	return convert(job)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

type converter struct {
	job   *mpiv2.MPIJob
	notes []Note
}

func (c *converter) note(field string, a Action, format string, args ...any) {
	c.notes = append(c.notes, Note{Field: field, Action: a, Detail: fmt.Sprintf(format, args...)})
}

func convert(job *mpiv2.MPIJob) (*Result, error) {
	c := &converter{job: job}
	spec := job.Spec
	if job.Name == "" {
		return nil, &Error{Field: "metadata.name", Problem: "is empty", Fix: "name the job"}
	}
	if errs := validation.IsDNS1123Label(job.Name); len(errs) > 0 {
		return nil, &Error{Field: "metadata.name", Problem: fmt.Sprintf("%q is not a valid name: %s", job.Name, strings.Join(errs, ", "))}
	}
	if len(job.Name) > api.MaxJobNameLength {
		return nil, &Error{Field: "metadata.name", Problem: fmt.Sprintf("%q has %d characters, more than %d", job.Name, len(job.Name), api.MaxJobNameLength),
			Fix: "rename it in the manifest (JobSet appends \"-launcher-0-0-xxxxx\" to pod names, which must stay within 63)"}
	}
	launcher, worker := spec.MPIReplicaSpecs[mpiv2.MPIReplicaTypeLauncher], spec.MPIReplicaSpecs[mpiv2.MPIReplicaTypeWorker]
	for k := range spec.MPIReplicaSpecs {
		if k != mpiv2.MPIReplicaTypeLauncher && k != mpiv2.MPIReplicaTypeWorker {
			return nil, &Error{Field: "spec.mpiReplicaSpecs." + string(k), Problem: "is not a replica type", Fix: "use Launcher and Worker"}
		}
	}
	if launcher == nil {
		return nil, &Error{Field: "spec.mpiReplicaSpecs.Launcher", Problem: "is missing", Fix: "an MPIJob needs a Launcher with a container that runs mpirun"}
	}
	if launcher.Replicas != nil && *launcher.Replicas != 1 {
		return nil, &Error{Field: "spec.mpiReplicaSpecs.Launcher.replicas", Problem: fmt.Sprintf("is %d", *launcher.Replicas), Fix: "an MPI job has exactly 1 Launcher"}
	}
	if len(launcher.Template.Spec.Containers) == 0 {
		return nil, &Error{Field: "spec.mpiReplicaSpecs.Launcher.template.spec.containers", Problem: "is empty", Fix: "give the Launcher the container that runs mpirun"}
	}
	workers := int32(0)
	if worker != nil {
		workers = ptr.Deref(worker.Replicas, 1)
		if workers < 0 {
			return nil, &Error{Field: "spec.mpiReplicaSpecs.Worker.replicas", Problem: fmt.Sprintf("is %d", workers), Fix: "use 1 or more Workers"}
		}
		if len(worker.Template.Spec.Containers) == 0 {
			return nil, &Error{Field: "spec.mpiReplicaSpecs.Worker.template.spec.containers", Problem: "is empty", Fix: "give the Workers their container"}
		}
	}
	launcherAsWorker := ptr.Deref(spec.RunLauncherAsWorker, false)
	if workers == 0 && !launcherAsWorker {
		return nil, &Error{Field: "spec.mpiReplicaSpecs.Worker", Problem: "has no replicas and the Launcher is not a worker", Fix: "add Workers or set runLauncherAsWorker"}
	}
	lc, wc := launcher.Template.Spec.Containers[0], corev1.Container{}
	if worker != nil {
		wc = worker.Template.Spec.Containers[0]
	}
	gpus := hasGPU(lc) || hasGPU(wc)

	// The runtime.
	impl := spec.MPIImplementation
	if impl == "" {
		impl = mpiv2.MPIImplementationOpenMPI
	}
	var runtimeName string
	switch impl {
	case mpiv2.MPIImplementationOpenMPI:
		runtimeName = "mpi-openmpi"
		if gpus || launcherAsWorker {
			runtimeName = "mpi-openmpi-gpu"
		}
	case mpiv2.MPIImplementationIntel:
		runtimeName = "mpi-intel"
	case mpiv2.MPIImplementationMPICH:
		runtimeName = "mpi-mpich"
	default:
		return nil, &Error{Field: "spec.mpiImplementation", Problem: fmt.Sprintf("%q is unknown", impl), Fix: "use OpenMPI, Intel or MPICH"}
	}
	c.note("spec.mpiImplementation", Mapped, "%s → runtime %s", impl, runtimeName)
	base, err := shippedRuntime(runtimeName)
	if err != nil {
		return nil, err
	}
	separateLauncher := !runtimes.LauncherAsNode(&base.Spec)
	// Each role's image in the runtime: the GPU runtime's Workers run the
	// CUDA image and its Launcher the CPU one.
	baseImages := map[string]string{}
	for i := range base.Spec.Template.Spec.ReplicatedJobs {
		rj := &base.Spec.Template.Spec.ReplicatedJobs[i]
		baseImages[rj.Name] = nodeContainer(&rj.Template.Spec.Template.Spec).Image
	}

	tj := &trainer.TrainJob{
		TypeMeta: metav1.TypeMeta{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind},
		ObjectMeta: metav1.ObjectMeta{
			Name: job.Name, Namespace: job.Namespace, Labels: maps.Clone(job.Labels), Annotations: maps.Clone(job.Annotations),
		},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: runtimeName, APIGroup: ptr.To(trainer.GroupVersion.Group), Kind: ptr.To(trainer.ClusterTrainingRuntimeKind)},
			Trainer:    &trainer.Trainer{},
		},
	}
	c.note("metadata", Mapped, "name, namespace, labels and annotations kept")

	// Workers and slots.
	switch {
	case separateLauncher && launcherAsWorker:
		tj.Spec.Trainer.NumNodes = ptr.To(workers + 1)
		c.note("spec.mpiReplicaSpecs.Worker.replicas", Changed, "%d + the Launcher (runLauncherAsWorker) → spec.trainer.numNodes %d: on %s the Launcher hosts no ranks, so one more Worker keeps the number of rank hosts", workers, workers+1, runtimeName)
	case separateLauncher:
		tj.Spec.Trainer.NumNodes = ptr.To(workers)
		c.note("spec.mpiReplicaSpecs.Worker.replicas", Mapped, "%d → spec.trainer.numNodes %d", workers, workers)
	case launcherAsWorker:
		tj.Spec.Trainer.NumNodes = ptr.To(workers + 1)
		c.note("spec.mpiReplicaSpecs.Worker.replicas", Mapped, "%d + the Launcher (runLauncherAsWorker) → spec.trainer.numNodes %d", workers, workers+1)
		c.note("spec.runLauncherAsWorker", Mapped, "runtime %s runs the Launcher as a rank host", runtimeName)
	default:
		tj.Spec.Trainer.NumNodes = ptr.To(workers + 1)
		c.note("spec.mpiReplicaSpecs.Worker.replicas", Changed, "%d → spec.trainer.numNodes %d: on %s the Launcher hosts ranks too (one more rank host than before)", workers, workers+1, runtimeName)
	}
	slots := ptr.Deref(spec.SlotsPerWorker, 1)
	tj.Spec.Trainer.NumProcPerNode = ptr.To(slots)
	c.note("spec.slotsPerWorker", Mapped, "%d → spec.trainer.numProcPerNode", slots)

	// The Launcher's container: command, args and env are the TrainJob's.
	if len(lc.Command) > 0 {
		tj.Spec.Trainer.Command = lc.Command
		c.note("Launcher command", Mapped, "→ spec.trainer.command")
	}
	if len(lc.Args) > 0 {
		tj.Spec.Trainer.Args = lc.Args
		c.note("Launcher args", Mapped, "→ spec.trainer.args")
	}
	if env := c.env("Launcher env", lc.Env); len(env) > 0 {
		tj.Spec.Trainer.Env = env
		c.note("Launcher env", Mapped, "→ spec.trainer.env")
	}

	// Images and resources go into the job's own runtime: Trainer would
	// give spec.trainer.image and resourcesPerNode to the Launcher alone.
	over := jobspec.Overrides{}
	var workerRes, launcherRes *corev1.ResourceRequirements
	perJob := fmt.Sprintf("the job's runtime %s", job.Name)
	if lc.Image != "" && lc.Image != baseImages[api.LauncherJob] {
		over.LauncherImage = lc.Image
		c.note("Launcher image", Changed, "→ the Launcher's image in %s", perJob)
	}
	if hasResources(lc.Resources) {
		launcherRes = lc.Resources.DeepCopy()
		if launcherAsWorker && separateLauncher {
			if gone := dropGPUs(launcherRes); len(gone) > 0 {
				c.note("Launcher resources", Changed, "%s dropped: the Launcher hosts no ranks here, the extra Worker has them (as many GPUs in all as before)", strings.Join(gone, ", "))
			}
		}
		if hasResources(*launcherRes) {
			c.note("Launcher resources", Changed, "→ the Launcher's resources in %s", perJob)
		} else {
			launcherRes = nil
		}
	}
	var patches []trainer.ReplicatedJobPatch
	if worker != nil {
		if wc.Image != "" && wc.Image != baseImages[api.WorkerJob] {
			over.WorkerImage = wc.Image
			c.note("Worker image", Changed, "→ the Workers' image in %s (Trainer sets spec.trainer.image on the Launcher only)", perJob)
		}
		if hasResources(wc.Resources) {
			workerRes = wc.Resources.DeepCopy()
			c.note("Worker resources", Changed, "→ the Workers' resources in %s (Trainer sets resourcesPerNode on the Launcher only)", perJob)
		}
		// Trainer refuses environment in a patch of the node containers:
		// the Workers' variables join the Launcher's, which mpirun -x
		// passes to the ranks (sshd on the Workers would not).
		for _, e := range c.env("Worker env", wc.Env) {
			if !slices.ContainsFunc(tj.Spec.Trainer.Env, func(l corev1.EnvVar) bool { return l.Name == e.Name }) {
				tj.Spec.Trainer.Env = append(tj.Spec.Trainer.Env, e)
				c.note("Worker env "+e.Name, Changed, "→ spec.trainer.env (the Launcher's: Trainer sets no Worker environment; pass it to the ranks with mpirun -x %s)", e.Name)
			} else {
				c.note("Worker env "+e.Name, Dropped, "the Launcher sets %s too; its value is kept (pass it to the ranks with mpirun -x %s)", e.Name, e.Name)
			}
		}
		if p := c.podPatch(api.WorkerJob, "Worker", &worker.Template.Spec); p != nil {
			patches = append(patches, *p)
		}
		for _, f := range []string{"command", "args"} {
			if (f == "command" && len(wc.Command) > 0) || (f == "args" && len(wc.Args) > 0) {
				c.note("Worker "+f, Dropped, "Workers run sshd in mpijob runtimes; the program starts from the Launcher's mpirun")
			}
		}
		if len(worker.Template.Spec.Containers) > 1 {
			c.note("Worker sidecar containers", Dropped, "%d extra container(s): a job's runtime carries only images and resources; ask an administrator for a runtime with them", len(worker.Template.Spec.Containers)-1)
		}
		c.restartPolicy("Worker", worker.RestartPolicy)
	}
	if p := c.podPatch(api.LauncherJob, "Launcher", &launcher.Template.Spec); p != nil {
		patches = append(patches, *p)
	}
	if len(patches) > 0 {
		tj.Spec.RuntimePatches = []trainer.RuntimePatch{{
			Manager:             PatchManager,
			TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: patches}}},
		}}
	}
	if len(launcher.Template.Spec.Containers) > 1 {
		c.note("Launcher sidecar containers", Dropped, "%d extra container(s): a job's runtime carries only images and resources; ask an administrator for a runtime with them", len(launcher.Template.Spec.Containers)-1)
	}
	c.restartPolicy("Launcher", launcher.RestartPolicy)
	if p := spec.SSHAuthMountPath; p != "" && p != ptr.Deref(base.Spec.MLPolicy.MPI.SSHAuthMountPath, "") {
		detail := fmt.Sprintf("%s: runtime %s mounts the SSH keys at %s", p, runtimeName, ptr.Deref(base.Spec.MLPolicy.MPI.SSHAuthMountPath, ""))
		if strings.HasPrefix(p, "/root") {
			detail += "; keys under /root mean the image runs as root, which Pod Security \"restricted\" refuses: move to a non-root user (mpijob images use /home/mpiuser/.ssh)"
		}
		c.note("spec.sshAuthMountPath", Dropped, "%s", detail)
	}
	switch spec.LauncherCreationPolicy {
	case mpiv2.LauncherCreationPolicyAtStartup:
		c.note("spec.launcherCreationPolicy", Changed, "AtStartup → the Launcher starts when every Worker is Ready (all mpijob runtimes)")
	case mpiv2.LauncherCreationPolicyWaitForWorkersReady:
		c.note("spec.launcherCreationPolicy", Mapped, "WaitForWorkersReady: what every mpijob runtime does")
	}

	// Run policy.
	rp := spec.RunPolicy
	if rp.CleanPodPolicy != nil {
		c.note("spec.runPolicy.cleanPodPolicy", Dropped, "%s: pods stay until the TrainJob is deleted; `kubectl mpijob delete` removes them", *rp.CleanPodPolicy)
	}
	if rp.TTLSecondsAfterFinished != nil {
		c.note("spec.runPolicy.ttlSecondsAfterFinished", Dropped, "%d: a finished TrainJob stays until deleted (`kubectl mpijob delete`); its Workers stop when the Launcher finishes", *rp.TTLSecondsAfterFinished)
	}
	if rp.ActiveDeadlineSeconds != nil {
		tj.Spec.ActiveDeadlineSeconds = *rp.ActiveDeadlineSeconds
		c.note("spec.runPolicy.activeDeadlineSeconds", Mapped, "%d → spec.activeDeadlineSeconds", *rp.ActiveDeadlineSeconds)
	}
	if rp.BackoffLimit != nil {
		c.note("spec.runPolicy.backoffLimit", Dropped, "%d: a failed Launcher or Worker fails the job (a lost rank cannot rejoin); rerun it with `kubectl mpijob clone`", *rp.BackoffLimit)
	}
	if rp.Suspend != nil {
		tj.Spec.Suspend = rp.Suspend
		c.note("spec.runPolicy.suspend", Mapped, "→ spec.suspend")
	}
	if rp.ManagedBy != nil {
		c.note("spec.runPolicy.managedBy", Dropped, "%q: TrainJobs are managed by Trainer (or MultiKueue through spec.managedBy)", *rp.ManagedBy)
	}
	var gangTimeout string
	if sp := rp.SchedulingPolicy; sp != nil {
		if sp.Queue != "" {
			if tj.Labels == nil {
				tj.Labels = map[string]string{}
			}
			tj.Labels[queue.NameLabel] = sp.Queue
			c.note("spec.runPolicy.schedulingPolicy.queue", Changed, "%q → Kueue LocalQueue %q (label %s); create it if it does not exist", sp.Queue, sp.Queue, queue.NameLabel)
		}
		if sp.PriorityClass != "" {
			c.note("spec.runPolicy.schedulingPolicy.priorityClass", Dropped, "%q: pod priority set by a namespace could preempt other namespaces' jobs; priorities come from Kueue (label kueue.x-k8s.io/priority-class with a WorkloadPriorityClass an administrator made)", sp.PriorityClass)
		}
		if sp.ScheduleTimeoutSeconds != nil {
			gangTimeout = fmt.Sprintf("%ds", *sp.ScheduleTimeoutSeconds)
			c.note("spec.runPolicy.schedulingPolicy.scheduleTimeoutSeconds", Changed, "%d → annotation %s of %s (the job is reported stuck, not killed)", *sp.ScheduleTimeoutSeconds, runtimes.GangTimeoutAnnotation, perJob)
		}
		if sp.MinAvailable != nil {
			c.note("spec.runPolicy.schedulingPolicy.minAvailable", Dropped, "%d: a TrainJob's Launcher starts only when every Worker is placed; Kueue admits the whole job at once, and the runtime policy %s reports a job that waits too long", *sp.MinAvailable, runtimes.GangTimeoutAnnotation)
		}
		if sp.MinResources != nil {
			c.note("spec.runPolicy.schedulingPolicy.minResources", Dropped, "Kueue computes the job's resources from its pods")
		}
	}
	if len(job.Status.Conditions) > 0 || job.Status.StartTime != nil {
		c.note("status", Dropped, "the legacy job's status does not carry over; the TrainJob starts fresh")
	}

	res := &Result{TrainJob: tj}
	if over.LauncherImage != "" || over.WorkerImage != "" || workerRes != nil || launcherRes != nil || gangTimeout != "" {
		rt := jobspec.Derive(base, job.Name, job.Namespace, over)
		setResources(rt, api.WorkerJob, workerRes)
		if runtimes.LauncherAsNode(&base.Spec) {
			setResources(rt, api.LauncherJob, workerRes)
		} else {
			setResources(rt, api.LauncherJob, launcherRes)
		}
		rt.Annotations[api.DescriptionAnnotation] = fmt.Sprintf("runtime of MPI job %s, converted from a legacy MPIJob: %s with the legacy images and resources (deleted with the job)", job.Name, runtimeName)
		if gangTimeout != "" {
			rt.Annotations[runtimes.GangTimeoutAnnotation] = gangTimeout
		}
		res.Runtime = rt
		tj.Spec.RuntimeRef = trainer.RuntimeRef{Name: rt.Name, APIGroup: ptr.To(trainer.GroupVersion.Group), Kind: ptr.To(trainer.TrainingRuntimeKind)}
		if tj.Labels == nil {
			tj.Labels = map[string]string{}
		}
		tj.Labels[api.BaseRuntimeLabel] = runtimeName
		c.note("runtime", Changed, "TrainingRuntime %s in the job's namespace: %s with the legacy images and resources, owned by the job once it exists (a namespace editor applies it, no administrator needed)", rt.Name, runtimeName)
	}
	sort.SliceStable(c.notes, func(i, j int) bool { return order(c.notes[i].Action) < order(c.notes[j].Action) })
	res.Notes = c.notes
	return res, nil
}

func order(a Action) int {
	switch a {
	case Mapped:
		return 0
	case Changed:
		return 1
	}
	return 2
}

func (c *converter) restartPolicy(role string, p mpiv2.RestartPolicy) {
	if p != "" && p != mpiv2.RestartPolicyNever {
		c.note("spec.mpiReplicaSpecs."+role+".restartPolicy", Changed, "%s → Never: a failed %s fails the job (a lost rank cannot rejoin)", p, role)
	}
}

// podPatch turns what a legacy pod template has beyond the container's
// image, command, environment and resources into a runtime patch of replicated job rj,
// and reports each field.
func (c *converter) podPatch(rj, role string, src *corev1.PodSpec) *trainer.ReplicatedJobPatch {
	to := "→ spec.runtimePatches (manager " + PatchManager + ")"
	ps := &trainer.PodSpecPatch{}
	some := false
	if len(src.NodeSelector) > 0 {
		ps.NodeSelector = src.NodeSelector
		c.note(role+" nodeSelector", Changed, "%s", to)
		some = true
	}
	if len(src.Tolerations) > 0 {
		ps.Tolerations = src.Tolerations
		c.note(role+" tolerations", Changed, "%s", to)
		some = true
	}
	if src.Affinity != nil {
		ps.Affinity = src.Affinity
		c.note(role+" affinity", Changed, "%s (replaces the runtime's one-Worker-per-node rule)", to)
		some = true
	}
	node := trainer.ContainerPatch{Name: api.NodeContainer}
	if len(src.Volumes) > 0 {
		ps.Volumes = src.Volumes
		if len(src.Containers) > 0 {
			node.VolumeMounts = src.Containers[0].VolumeMounts
		}
		c.note(role+" volumes", Changed, "%d volume(s) and their mounts %s", len(src.Volumes), to)
		some = true
	}
	if len(node.VolumeMounts) > 0 {
		ps.Containers = []trainer.ContainerPatch{node}
		some = true
	}
	if src.ServiceAccountName != "" {
		ps.ServiceAccountName = ptr.To(src.ServiceAccountName)
		c.note(role+" serviceAccountName", Changed, "%q %s", src.ServiceAccountName, to)
		some = true
	}
	if len(src.ImagePullSecrets) > 0 {
		ps.ImagePullSecrets = src.ImagePullSecrets
		c.note(role+" imagePullSecrets", Changed, "%s", to)
		some = true
	}
	if src.SecurityContext != nil && !apiequality.Semantic.DeepEqual(src.SecurityContext, &corev1.PodSecurityContext{}) {
		c.note(role+" securityContext", Dropped, "mpijob runtimes run Pod Security \"restricted\" (non-root, no privilege escalation)")
	}
	if len(src.Containers) > 0 && src.Containers[0].SecurityContext != nil {
		c.note(role+" container securityContext", Dropped, "mpijob runtimes run Pod Security \"restricted\"")
	}
	if src.PriorityClassName != "" {
		c.note(role+" priorityClassName", Dropped, "%q: pod priority set by a namespace could preempt other namespaces' jobs; use Kueue priorities", src.PriorityClassName)
	}
	if !some {
		return nil
	}
	return &trainer.ReplicatedJobPatch{Name: rj, Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{Template: &trainer.PodTemplatePatch{Spec: ps}}}}
}

// env drops the variables Trainer sets itself (and refuses from users).
func (c *converter) env(what string, env []corev1.EnvVar) []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, e := range env {
		if reservedEnv[e.Name] {
			c.note(what+" "+e.Name, Dropped, "Trainer sets it for every MPI job (and refuses it from users)")
			continue
		}
		out = append(out, e)
	}
	return out
}

// reservedEnv are the MPI variables Trainer v2.3 sets and refuses in a
// TrainJob (constants.MPIReservedEnvNames).
var reservedEnv = map[string]bool{
	"OMPI_MCA_orte_default_hostfile":    true,
	"OMPI_MCA_plm_rsh_args":             true,
	"OMPI_MCA_orte_keep_fqdn_hostnames": true,
	"OMPI_MCA_orte_set_default_slots":   true,
}

func hasResources(r corev1.ResourceRequirements) bool {
	return len(r.Requests) > 0 || len(r.Limits) > 0
}

// dropGPUs removes every */gpu resource of r and names them.
func dropGPUs(r *corev1.ResourceRequirements) []string {
	gone := map[string]string{}
	for _, rl := range []corev1.ResourceList{r.Requests, r.Limits} {
		for k, q := range rl {
			if strings.HasSuffix(string(k), "/gpu") {
				gone[string(k)] = q.String()
				delete(rl, k)
			}
		}
	}
	out := make([]string, 0, len(gone))
	for k, q := range gone {
		out = append(out, k+" "+q)
	}
	sort.Strings(out)
	return out
}

// setResources gives the node container of replicated job rj the legacy
// container's resources as they were (requests and limits).
func setResources(rt *trainer.TrainingRuntime, rj string, r *corev1.ResourceRequirements) {
	if r == nil {
		return
	}
	for i := range rt.Spec.Template.Spec.ReplicatedJobs {
		if rt.Spec.Template.Spec.ReplicatedJobs[i].Name == rj {
			nodeContainer(&rt.Spec.Template.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec).Resources = *r.DeepCopy()
		}
	}
}

func hasGPU(c corev1.Container) bool {
	for name := range c.Resources.Limits {
		if strings.HasSuffix(string(name), "/gpu") {
			return true
		}
	}
	for name := range c.Resources.Requests {
		if strings.HasSuffix(string(name), "/gpu") {
			return true
		}
	}
	return false
}

func nodeContainer(spec *corev1.PodSpec) *corev1.Container {
	for i := range spec.Containers {
		if spec.Containers[i].Name == "node" {
			return &spec.Containers[i]
		}
	}
	return &spec.Containers[0]
}

// shippedRuntime reads a runtime of config/runtimes.
func shippedRuntime(name string) (*trainer.ClusterTrainingRuntime, error) {
	rt, err := config.Runtime(name)
	if err != nil {
		return nil, err
	}
	if rt.Spec.MLPolicy == nil || rt.Spec.MLPolicy.MPI == nil || len(rt.Spec.Template.Spec.ReplicatedJobs) != 2 {
		return nil, errors.New("shipped runtime " + name + " is not an MPI runtime with node and launcher")
	}
	return rt, nil
}

// YAML renders the result as a multi-document manifest: the runtime (when
// one is needed) first, then the TrainJob.
func (r *Result) YAML() ([]byte, error) {
	var out bytes.Buffer
	objs := []any{}
	if r.Runtime != nil {
		objs = append(objs, clean(r.Runtime))
	}
	objs = append(objs, clean(r.TrainJob))
	for i, o := range objs {
		b, err := yaml.Marshal(o)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			out.WriteString("---\n")
		}
		out.Write(b)
	}
	return out.Bytes(), nil
}

// clean drops empty status and creationTimestamp from the output.
func clean(o any) map[string]any {
	b, _ := yaml.Marshal(o)
	m := map[string]any{}
	_ = yaml.Unmarshal(b, &m)
	delete(m, "status")
	if md, ok := m["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	return m
}

// Report renders the notes as an aligned table.
func (r *Result) Report() string {
	var b strings.Builder
	w := 0
	for _, n := range r.Notes {
		w = max(w, len(n.Field))
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "%-8s %-*s  %s\n", n.Action, w, n.Field, n.Detail)
	}
	return b.String()
}
