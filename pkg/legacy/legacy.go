// Package legacy turns a legacy kubeflow.org/v2beta1 MPIJob into a
// TrainJob on one of mpijob's runtimes, plus, when the legacy pod templates
// carry what a TrainJob cannot (Worker images and resources, volumes,
// scheduling), a ClusterTrainingRuntime made for it. Every legacy field is
// reported as mapped, changed or dropped, with the reason.
package legacy

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
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
	"github.com/mpijob/mpijob/pkg/admission"
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
	// Runtime is nil when the job fits a shipped runtime as is.
	Runtime *trainer.ClusterTrainingRuntime `json:"runtime,omitempty"`
	Notes   []Note                          `json:"notes"`
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
	if errs := validation.IsDNS1123Subdomain(job.Name); len(errs) > 0 {
		return nil, &Error{Field: "metadata.name", Problem: fmt.Sprintf("%q is not a valid name: %s", job.Name, strings.Join(errs, ", "))}
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
	if launcherAsWorker && runtimeName != "mpi-openmpi-gpu" {
		return nil, &Error{Field: "spec.runLauncherAsWorker", Problem: fmt.Sprintf("is not supported with %s", impl), Fix: "mpijob's Launcher hosts ranks only with OpenMPI (mpi-openmpi-gpu)"}
	}
	base, err := shippedRuntime(runtimeName)
	if err != nil {
		return nil, err
	}
	separateLauncher := !runtimes.LauncherAsNode(&base.Spec)
	baseImage := nodeContainer(&base.Spec.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec).Image

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
	if separateLauncher {
		tj.Spec.Trainer.NumNodes = ptr.To(workers)
		c.note("spec.mpiReplicaSpecs.Worker.replicas", Mapped, "%d → spec.trainer.numNodes %d", workers, workers)
	} else {
		tj.Spec.Trainer.NumNodes = ptr.To(workers + 1)
		if launcherAsWorker {
			c.note("spec.mpiReplicaSpecs.Worker.replicas", Mapped, "%d + the Launcher (runLauncherAsWorker) → spec.trainer.numNodes %d", workers, workers+1)
		} else {
			c.note("spec.mpiReplicaSpecs.Worker.replicas", Changed, "%d → spec.trainer.numNodes %d: on %s the Launcher hosts ranks too (one more rank host than before)", workers, workers+1, runtimeName)
		}
	}
	if launcherAsWorker && separateLauncher {
		tj.Spec.Trainer.NumNodes = ptr.To(workers + 1)
		c.note("spec.runLauncherAsWorker", Changed, "mpijob's Launcher hosts no ranks: %d Workers instead of %d + the Launcher, the same number of rank hosts", workers+1, workers)
	} else if launcherAsWorker {
		c.note("spec.runLauncherAsWorker", Mapped, "runtime %s runs the Launcher as a rank host", runtimeName)
	}
	slots := ptr.Deref(spec.SlotsPerWorker, 1)
	tj.Spec.Trainer.NumProcPerNode = ptr.To(slots)
	c.note("spec.slotsPerWorker", Mapped, "%d → spec.trainer.numProcPerNode", slots)

	// The Launcher's container.
	// The Launcher's image and resources go into the job's runtime: Trainer
	// would give spec.trainer.image and resourcesPerNode to the Launcher
	// alone, which admission refuses for images the Workers lack.
	var launcherImage string
	if lc.Image != "" && lc.Image != baseImage {
		launcherImage = lc.Image
	}
	if len(lc.Command) > 0 {
		tj.Spec.Trainer.Command = lc.Command
		c.note("Launcher command", Mapped, "→ spec.trainer.command")
	}
	if len(lc.Args) > 0 {
		tj.Spec.Trainer.Args = lc.Args
		c.note("Launcher args", Mapped, "→ spec.trainer.args")
	}
	if len(lc.Env) > 0 {
		tj.Spec.Trainer.Env = lc.Env
		c.note("Launcher env", Mapped, "→ spec.trainer.env")
	}
	launcherRes := len(lc.Resources.Requests) > 0 || len(lc.Resources.Limits) > 0

	// What needs a runtime of its own.
	rt := base.DeepCopy()
	custom := false
	podSpecs := rt.Spec.Template.Spec.ReplicatedJobs
	wpod := &podSpecs[0].Template.Spec.Template.Spec
	lpod := &podSpecs[1].Template.Spec.Template.Spec
	if worker != nil {
		if wc.Image != "" && wc.Image != baseImage {
			setImage(wpod, wc.Image)
			custom = true
			c.note("Worker image", Changed, "→ the Workers' image in runtime %s (Trainer sets spec.trainer.image on the Launcher only)", job.Name)
		}
		if separateLauncher && (len(wc.Resources.Requests) > 0 || len(wc.Resources.Limits) > 0) {
			nodeContainer(wpod).Resources = *wc.Resources.DeepCopy()
			custom = true
			c.note("Worker resources", Changed, "→ runtime %s (TrainJobs set Worker resources only where the Launcher hosts ranks)", job.Name)
		}
		if len(wc.Env) > 0 {
			nodeContainer(wpod).Env = append(nodeContainer(wpod).Env, wc.Env...)
			custom = true
			c.note("Worker env", Changed, "→ runtime %s", job.Name)
		}
		if mergePodFields(wpod, &worker.Template.Spec, "Worker", c) {
			custom = true
		}
		for _, f := range []string{"command", "args"} {
			if (f == "command" && len(wc.Command) > 0) || (f == "args" && len(wc.Args) > 0) {
				c.note("Worker "+f, Dropped, "Workers run sshd in mpijob runtimes; the program starts from the Launcher's mpirun")
			}
		}
		if len(worker.Template.Spec.Containers) > 1 {
			c.note("Worker sidecar containers", Dropped, "%d extra container(s); add them to runtime %s by hand if needed", len(worker.Template.Spec.Containers)-1, job.Name)
		}
		c.restartPolicy("Worker", worker.RestartPolicy)
	}
	if launcherImage != "" {
		setImage(lpod, launcherImage)
		custom = true
		c.note("Launcher image", Changed, "→ the Launcher's image in runtime %s", job.Name)
	}
	if launcherRes {
		nodeContainer(lpod).Resources = *lc.Resources.DeepCopy()
		custom = true
		c.note("Launcher resources", Changed, "→ the Launcher's resources in runtime %s", job.Name)
	}
	if mergePodFields(lpod, &launcher.Template.Spec, "Launcher", c) {
		custom = true
	}
	if len(launcher.Template.Spec.Containers) > 1 {
		c.note("Launcher sidecar containers", Dropped, "%d extra container(s); add them to runtime %s by hand if needed", len(launcher.Template.Spec.Containers)-1, job.Name)
	}
	c.restartPolicy("Launcher", launcher.RestartPolicy)
	if p := spec.SSHAuthMountPath; p != "" && p != ptr.Deref(base.Spec.MLPolicy.MPI.SSHAuthMountPath, "") {
		rt.Spec.MLPolicy.MPI.SSHAuthMountPath = ptr.To(p)
		custom = true
		detail := fmt.Sprintf("%s → runtime %s", p, job.Name)
		if strings.HasPrefix(p, "/root") {
			detail += "; keys under /root mean the image runs as root, which Pod Security \"restricted\" refuses: move to a non-root user (mpijob images use /home/mpiuser/.ssh)"
		}
		c.note("spec.sshAuthMountPath", Changed, "%s", detail)
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
		rt.Spec.Template.Spec.TTLSecondsAfterFinished = rp.TTLSecondsAfterFinished
		custom = true
		c.note("spec.runPolicy.ttlSecondsAfterFinished", Changed, "%d → runtime %s: the JobSet (pods) is deleted after it, the TrainJob stays", *rp.TTLSecondsAfterFinished, job.Name)
	}
	if rp.ActiveDeadlineSeconds != nil {
		tj.Spec.ActiveDeadlineSeconds = *rp.ActiveDeadlineSeconds
		c.note("spec.runPolicy.activeDeadlineSeconds", Mapped, "%d → spec.activeDeadlineSeconds", *rp.ActiveDeadlineSeconds)
	}
	if rp.BackoffLimit != nil {
		podSpecs[1].Template.Spec.BackoffLimit = rp.BackoffLimit
		custom = true
		c.note("spec.runPolicy.backoffLimit", Changed, "%d → the Launcher's backoffLimit in runtime %s; a failed Worker still fails the job (backoffLimit 0)", *rp.BackoffLimit, job.Name)
	}
	if rp.Suspend != nil {
		tj.Spec.Suspend = rp.Suspend
		c.note("spec.runPolicy.suspend", Mapped, "→ spec.suspend")
	}
	if rp.ManagedBy != nil {
		c.note("spec.runPolicy.managedBy", Dropped, "%q: TrainJobs are managed by Trainer (or MultiKueue through spec.managedBy)", *rp.ManagedBy)
	}
	if sp := rp.SchedulingPolicy; sp != nil {
		if sp.Queue != "" {
			if tj.Labels == nil {
				tj.Labels = map[string]string{}
			}
			tj.Labels[queue.NameLabel] = sp.Queue
			c.note("spec.runPolicy.schedulingPolicy.queue", Changed, "%q → Kueue LocalQueue %q (label %s); create it if it does not exist", sp.Queue, sp.Queue, queue.NameLabel)
		}
		if sp.PriorityClass != "" {
			wpod.PriorityClassName, lpod.PriorityClassName = sp.PriorityClass, sp.PriorityClass
			custom = true
			c.note("spec.runPolicy.schedulingPolicy.priorityClass", Changed, "%q → the pods' priorityClassName in runtime %s", sp.PriorityClass, job.Name)
		}
		if sp.ScheduleTimeoutSeconds != nil {
			if rt.Annotations == nil {
				rt.Annotations = map[string]string{}
			}
			rt.Annotations[admission.GangTimeoutAnnotation] = fmt.Sprintf("%ds", *sp.ScheduleTimeoutSeconds)
			custom = true
			c.note("spec.runPolicy.schedulingPolicy.scheduleTimeoutSeconds", Changed, "%d → runtime policy %s (the job is reported stuck, not killed)", *sp.ScheduleTimeoutSeconds, admission.GangTimeoutAnnotation)
		}
		if sp.MinAvailable != nil {
			c.note("spec.runPolicy.schedulingPolicy.minAvailable", Dropped, "%d: a TrainJob's Launcher starts only when every Worker is placed; Kueue admits the whole job at once, and the runtime policy %s reports a job that waits too long", *sp.MinAvailable, admission.GangTimeoutAnnotation)
		}
		if sp.MinResources != nil {
			c.note("spec.runPolicy.schedulingPolicy.minResources", Dropped, "Kueue computes the job's resources from its pods")
		}
	}
	if len(job.Status.Conditions) > 0 || job.Status.StartTime != nil {
		c.note("status", Dropped, "the legacy job's status does not carry over; the TrainJob starts fresh")
	}

	res := &Result{TrainJob: tj}
	if custom {
		rt.Name = job.Name
		rt.ResourceVersion, rt.UID, rt.CreationTimestamp = "", "", metav1.Time{}
		if rt.Annotations == nil {
			rt.Annotations = map[string]string{}
		}
		rt.Annotations["mpijob.dev/description"] = fmt.Sprintf("Converted from MPIJob %s, based on %s", job.Name, runtimeName)
		rt.Annotations["mpijob.dev/converted-from"] = runtimeName
		rt.TypeMeta = metav1.TypeMeta{APIVersion: trainer.GroupVersion.String(), Kind: trainer.ClusterTrainingRuntimeKind}
		res.Runtime = rt
		tj.Spec.RuntimeRef.Name = rt.Name
		c.note("runtime", Changed, "the legacy pod templates need runtime %s (based on %s); an administrator installs it", rt.Name, runtimeName)
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

// mergePodFields copies the scheduling and storage fields of a legacy pod
// template into the runtime's pod, and reports each.
func mergePodFields(dst, src *corev1.PodSpec, role string, c *converter) bool {
	changed := false
	if len(src.NodeSelector) > 0 {
		dst.NodeSelector = src.NodeSelector
		c.note(role+" nodeSelector", Changed, "→ runtime %s", c.job.Name)
		changed = true
	}
	if len(src.Tolerations) > 0 {
		dst.Tolerations = src.Tolerations
		c.note(role+" tolerations", Changed, "→ runtime %s", c.job.Name)
		changed = true
	}
	if src.Affinity != nil {
		dst.Affinity = src.Affinity
		c.note(role+" affinity", Changed, "→ runtime %s (replaces the runtime's one-Worker-per-node rule)", c.job.Name)
		changed = true
	}
	if len(src.Volumes) > 0 {
		dst.Volumes = append(dst.Volumes, src.Volumes...)
		if len(src.Containers) > 0 {
			n := nodeContainer(dst)
			n.VolumeMounts = append(n.VolumeMounts, src.Containers[0].VolumeMounts...)
		}
		c.note(role+" volumes", Changed, "%d volume(s) and their mounts → runtime %s", len(src.Volumes), c.job.Name)
		changed = true
	}
	if src.SecurityContext != nil && !apiequality.Semantic.DeepEqual(src.SecurityContext, &corev1.PodSecurityContext{}) {
		c.note(role+" securityContext", Dropped, "mpijob runtimes run Pod Security \"restricted\" (non-root, no privilege escalation)")
	}
	if len(src.Containers) > 0 && src.Containers[0].SecurityContext != nil {
		c.note(role+" container securityContext", Dropped, "mpijob runtimes run Pod Security \"restricted\"")
	}
	if src.ServiceAccountName != "" {
		dst.ServiceAccountName = src.ServiceAccountName
		c.note(role+" serviceAccountName", Changed, "%q → runtime %s", src.ServiceAccountName, c.job.Name)
		changed = true
	}
	return changed
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

func setImage(spec *corev1.PodSpec, image string) { nodeContainer(spec).Image = image }

// shippedRuntime reads a runtime of config/runtimes.
func shippedRuntime(name string) (*trainer.ClusterTrainingRuntime, error) {
	b, err := fs.ReadFile(config.Runtimes, "runtimes/"+name+".yaml")
	if err != nil {
		return nil, fmt.Errorf("runtime %s is not shipped: %w", name, err)
	}
	rt := &trainer.ClusterTrainingRuntime{}
	if err := yaml.Unmarshal(b, rt); err != nil {
		return nil, fmt.Errorf("shipped runtime %s: %w", name, err)
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
