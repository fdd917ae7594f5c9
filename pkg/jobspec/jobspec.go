package jobspec

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/dataconn"
	"github.com/mpijob/mpijob/pkg/queue"
	"github.com/mpijob/mpijob/pkg/runtimes"
)

// PatchManager names the runtime patch the builder writes (node selector).
const PatchManager = "mpijob.dev/job-builder"

// DefaultRuntime is the runtime a job gets when the user names none.
const DefaultRuntime = "mpi-openmpi"

// Input is what a user asks for: the flags of kubectl mpijob create, the
// arguments of the SDK's create_job, the dashboard's wizard. Its JSON form
// (snake_case) is the one the shared test vectors use.
type Input struct {
	// Name of the job: a DNS label of at most api.MaxJobNameLength characters.
	Name string `json:"name"`
	// Namespace of the job.
	Namespace string `json:"namespace,omitempty"`
	// Runtime is the ClusterTrainingRuntime the job starts from.
	Runtime string `json:"runtime"`
	// Workers is the number of Workers, the pods that host the ranks
	// besides the Launcher; at least 1.
	Workers int32 `json:"workers"`
	// SlotsPerWorker is the MPI ranks per Worker (0: the runtime's).
	SlotsPerWorker int32 `json:"slots_per_worker,omitempty"`
	// Image is the image of the Launcher and the Workers ("": the runtime's).
	Image string `json:"image,omitempty"`
	// LauncherImage and WorkerImage override Image for one side.
	LauncherImage string `json:"launcher_image,omitempty"`
	WorkerImage   string `json:"worker_image,omitempty"`
	// Command is what the Launcher runs (empty: the runtime's).
	Command []string `json:"command,omitempty"`
	// ResourcesPerWorker are the requests and limits of each Worker, by
	// resource name: cpu, memory, nvidia.com/gpu, amd.com/gpu, ... A GPU
	// count of 0 removes the runtime's GPUs.
	ResourcesPerWorker map[string]string `json:"resources_per_worker,omitempty"`
	// LauncherResources are the Launcher's cpu and memory.
	LauncherResources map[string]string `json:"launcher_resources,omitempty"`
	// Env is the Launcher's environment (mpirun -x passes it to ranks).
	Env []corev1.EnvVar `json:"env,omitempty"`
	// NodeSelector is the node labels the Launcher and Workers need.
	NodeSelector map[string]string `json:"node_selector,omitempty"`
	// Queue is the Kueue LocalQueue ("": none).
	Queue string `json:"queue,omitempty"`
	// DataConnections are OpenShift AI S3 connections (Secrets in the
	// job's namespace) whose keys reach the Launcher and every Worker as
	// references to the Secret; the first one's as the plain AWS_* names,
	// and the job's artifacts go to its bucket (dataconn.Env).
	DataConnections []string `json:"data_connections,omitempty"`
	// PVCs are PersistentVolumeClaims mounted on the Launcher and every
	// Worker.
	PVCs []dataconn.PVC `json:"pvcs,omitempty"`
	// ConfigMaps are ConfigMaps of the job's namespace mounted read-only
	// on the Launcher and every Worker, each key a file.
	ConfigMaps []dataconn.ConfigMap `json:"config_maps,omitempty"`
	// Timeout stops the job once it has run this long, a duration such
	// as 90m, 2h or 1h30m (spec.activeDeadlineSeconds; "": no limit).
	Timeout string `json:"timeout,omitempty"`
	// Retries is how many times the whole job starts again after a
	// failure: every Worker and the Launcher anew, the program from its
	// start (JobSet's failurePolicy.maxRestarts; 0: none).
	Retries int32 `json:"retries,omitempty"`
	// ResumeFrom starts the job from another job's last checkpoint when it
	// has none of its own yet: that job's name (its checkpoint place on
	// this job's first data connection or PVC) or a folder URI,
	// s3://BUCKET/PATH/ or file:///PATH/ (MPIJOB_RESUME_FROM).
	ResumeFrom string `json:"resume_from,omitempty"`
	// Priority is the Kueue WorkloadPriorityClass of a queued job.
	Priority string `json:"priority,omitempty"`
	// Tolerations let the Launcher and the Workers onto tainted nodes.
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// ImagePullSecrets are Secrets of the job's namespace that the
	// Launcher and the Workers pull their images with.
	ImagePullSecrets []string `json:"image_pull_secrets,omitempty"`
	// Description is a line about the job for the people who list it.
	Description string `json:"description,omitempty"`
	// EndStuckAfter is how long the job is left once it can never finish
	// (a rank failed while the others wait, an image that cannot be
	// pulled, Workers no node can take) before mpijob-manager ends it: a
	// duration such as 30m, or "off" (annotation
	// policy.mpijob.dev/end-stuck-after; "": the runtime's, 10m on the
	// shipped runtimes).
	EndStuckAfter string `json:"end_stuck_after,omitempty"`
	// GracePeriod is how long the ranks have to save a checkpoint and exit
	// when the job is stopped (preempted, suspended, retried, ended): a
	// duration such as 90s, 5m or 1h, at most MaxGracePeriod (the pods'
	// terminationGracePeriodSeconds; "": the runtime's, 60s on the shipped
	// runtimes).
	GracePeriod string `json:"grace_period,omitempty"`
	// ServiceAccount is a ServiceAccount of the job's namespace whose token
	// the Launcher and the Workers get ("": none; the shipped runtimes
	// mount no token). Admission lets only a user who may create that
	// ServiceAccount's tokens name it.
	ServiceAccount string `json:"service_account,omitempty"`
	// LauncherFlags go to mpirun (or mpiexec) before the program, e.g.
	// --bind-to none: inserted after the first word of the command, or
	// of the runtime's command when the job gives none.
	LauncherFlags []string `json:"launcher_flags,omitempty"`
	// RegisterModel, NAME[:VERSION], asks mpijob-manager to register the
	// job's model in the model registry once it succeeds (annotation
	// mpijob.dev/register-model; the version defaults to the job's name).
	// The model is found on the job's first data connection.
	RegisterModel string `json:"register_model,omitempty"`
	// RegisterArtifact names the model file to register when the job
	// writes more than one (default: its one model.* file).
	RegisterArtifact string `json:"register_artifact,omitempty"`
}

// Job is everything one MPI job needs: the TrainJob, and a per-job
// TrainingRuntime when the job changes images or resources. The runtime is
// created first (Trainer refuses a TrainJob whose runtime does not exist)
// and then owned by the TrainJob, see Owned.
type Job struct {
	TrainJob *trainer.TrainJob
	// Runtime is nil when the job runs on its ClusterTrainingRuntime as it is.
	Runtime *trainer.TrainingRuntime
}

// Error is a bad input: the field (Input's JSON name, with the resource
// name after a dot for resources), the value, what is wrong and the fix.
// CLI and SDK map Field to their own flag or argument name.
type Error struct {
	Field   string `json:"field"`
	Value   string `json:"value"`
	Problem string `json:"problem"`
}

func (e *Error) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("%s: %s", e.Field, e.Problem)
	}
	return fmt.Sprintf("%s %q: %s", e.Field, e.Value, e.Problem)
}

func errorf(field, value, format string, args ...any) *Error {
	return &Error{Field: field, Value: value, Problem: fmt.Sprintf(format, args...)}
}

// Build turns in into the objects of one MPI job on base (a
// ClusterTrainingRuntime, or a namespace's own TrainingRuntime carried as
// one: runtimes.AsBase). It checks every value first and returns an *Error
// naming the first bad one.
func Build(in Input, base *trainer.ClusterTrainingRuntime) (*Job, error) {
	if err := validateName(in.Name); err != nil {
		return nil, err
	}
	if base == nil || !runtimes.IsMPI(&base.Spec) {
		name := in.Runtime
		if base != nil {
			name = base.Name
		}
		return nil, errorf("runtime", name, "is not an MPI runtime (it has no MPI policy): see kubectl mpijob runtimes list")
	}
	if in.Workers < 1 {
		return nil, errorf("workers", fmt.Sprint(in.Workers), "a job needs at least 1 Worker")
	}
	if in.SlotsPerWorker < 0 {
		return nil, errorf("slots_per_worker", fmt.Sprint(in.SlotsPerWorker), "use 1 or more (MPI ranks per Worker)")
	}
	for _, f := range []struct{ field, value string }{{"image", in.Image}, {"launcher_image", in.LauncherImage}, {"worker_image", in.WorkerImage}} {
		if err := validateImage(f.field, f.value); err != nil {
			return nil, err
		}
	}
	if len(in.Command) > 0 && slices.Contains(in.Command, "") {
		return nil, errorf("command", strings.Join(in.Command, " "), "has an empty argument")
	}
	worker, err := parseResources("resources_per_worker", in.ResourcesPerWorker, true)
	if err != nil {
		return nil, err
	}
	launcher, err := parseResources("launcher_resources", in.LauncherResources, false)
	if err != nil {
		return nil, err
	}
	asNode := runtimes.LauncherAsNode(&base.Spec)
	if asNode && len(launcher) > 0 {
		return nil, errorf("launcher_resources", "", "on runtime %s the Launcher hosts ranks and is sized like every Worker: use resources_per_worker", base.Name)
	}
	for _, e := range in.Env {
		if errs := validation.IsEnvVarName(e.Name); len(errs) > 0 {
			return nil, errorf("env", e.Name, "is not a valid variable name: use letters, digits, '_', '-' or '.', not starting with a digit")
		}
		if err := checkEnvSource(e); err != nil {
			return nil, err
		}
	}
	for k, v := range in.NodeSelector {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return nil, errorf("node_selector", k, "is not a valid label key: use e.g. disktype or nvidia.com/gpu.product")
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return nil, errorf("node_selector", k+"="+v, "is not a valid label value: use at most 63 letters, digits, '-', '_' or '.'")
		}
	}
	if in.Queue != "" {
		if errs := validation.IsDNS1123Subdomain(in.Queue); len(errs) > 0 {
			return nil, errorf("queue", in.Queue, "is not a valid LocalQueue name: use lower-case letters, digits, '-' and '.'")
		}
	}
	if err := validateStorage(in); err != nil {
		return nil, err
	}
	resume, err := resumeURI(in)
	if err != nil {
		return nil, err
	}
	deadline, err := validateScheduling(in)
	if err != nil {
		return nil, err
	}
	grace, err := parseGracePeriod(in.GracePeriod)
	if err != nil {
		return nil, err
	}
	if in.ServiceAccount != "" {
		if errs := validation.IsDNS1123Subdomain(in.ServiceAccount); len(errs) > 0 {
			return nil, errorf("service_account", in.ServiceAccount, "is not a ServiceAccount name: use lower-case letters, digits, '-' and '.' (kubectl get serviceaccounts)")
		}
	}
	if err := validateRegistration(in); err != nil {
		return nil, err
	}
	command, err := withLauncherFlags(in, base)
	if err != nil {
		return nil, err
	}

	tj := &trainer.TrainJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind},
		ObjectMeta: metav1.ObjectMeta{Name: in.Name, Namespace: in.Namespace},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: base.Name, APIGroup: ptr.To(trainer.GroupVersion.Group), Kind: ptr.To(runtimes.KindOf(base))},
			Trainer:    &trainer.Trainer{},
		},
	}
	tr := tj.Spec.Trainer
	tr.NumNodes = ptr.To(in.Workers)
	if asNode {
		// The Launcher is a rank host: numNodes counts it.
		tr.NumNodes = ptr.To(in.Workers + 1)
	}
	if in.SlotsPerWorker > 0 {
		tr.NumProcPerNode = ptr.To(in.SlotsPerWorker)
	}
	if len(command) > 0 {
		tr.Command = command
	}
	for _, e := range in.Env {
		tr.Env = setEnv(tr.Env, e)
	}
	tj.Spec.ActiveDeadlineSeconds = deadline
	if in.Queue != "" || in.Priority != "" {
		tj.Labels = map[string]string{}
	}
	if in.Queue != "" {
		tj.Labels[queue.NameLabel] = in.Queue
	}
	if in.Priority != "" {
		tj.Labels[queue.PriorityLabel] = in.Priority
	}
	if in.Description != "" || in.EndStuckAfter != "" || in.RegisterModel != "" {
		tj.Annotations = map[string]string{}
	}
	if in.RegisterModel != "" {
		tj.Annotations[api.RegisterModelAnnotation] = in.RegisterModel
		if in.RegisterArtifact != "" {
			tj.Annotations[api.RegisterArtifactAnnotation] = in.RegisterArtifact
		}
	}
	if in.Description != "" {
		tj.Annotations[api.DescriptionAnnotation] = in.Description
	}
	if in.EndStuckAfter != "" {
		tj.Annotations[runtimes.EndStuckAfterAnnotation] = in.EndStuckAfter
	}
	if p := (PodPatch{NodeSelector: in.NodeSelector, Tolerations: in.Tolerations, ImagePullSecrets: in.ImagePullSecrets}); !p.Empty() {
		tj.Spec.RuntimePatches = []trainer.RuntimePatch{p.RuntimePatch()}
	}
	launcherImage := first(in.LauncherImage, in.Image)
	workerImage := first(in.WorkerImage, in.Image)
	storage := len(in.DataConnections) > 0 || len(in.PVCs) > 0 || len(in.ConfigMaps) > 0
	if launcherImage == "" && workerImage == "" && len(worker) == 0 && len(launcher) == 0 && !storage && in.Retries == 0 && grace == nil && in.ServiceAccount == "" {
		return &Job{TrainJob: tj}, nil
	}
	vols, mounts := dataconn.Volumes(in.PVCs, in.ConfigMaps...)
	rt := Derive(base, in.Name, in.Namespace, Overrides{
		LauncherImage: launcherImage, WorkerImage: workerImage,
		Worker: worker, Launcher: launcher,
		Env:     dataconn.WithResume(dataconn.Env(in.Name, in.DataConnections, in.PVCs), resume),
		Volumes: vols, Mounts: mounts,
		Retries: in.Retries, GracePeriod: grace, ServiceAccount: in.ServiceAccount,
	})
	tj.Spec.RuntimeRef = trainer.RuntimeRef{Name: rt.Name, APIGroup: ptr.To(trainer.GroupVersion.Group), Kind: ptr.To(trainer.TrainingRuntimeKind)}
	if tj.Labels == nil {
		tj.Labels = map[string]string{}
	}
	tj.Labels[api.BaseRuntimeLabel] = base.Name
	if runtimes.IsNamespaced(base) {
		tj.Labels[api.BaseRuntimeKindLabel] = trainer.TrainingRuntimeKind
	}
	return &Job{TrainJob: tj, Runtime: rt}, nil
}

// Overrides are what a per-job runtime changes in its base: the images and
// resources of the Launcher's and the Workers' "node" containers.
type Overrides struct {
	LauncherImage, WorkerImage string
	Worker, Launcher           corev1.ResourceList
	// Env, Volumes and Mounts carry data connections and PVCs to the
	// Launcher and every Worker (dataconn.Env, dataconn.Volumes).
	Env     []corev1.EnvVar
	Volumes []corev1.Volume
	Mounts  []corev1.VolumeMount
	// Retries sets JobSet's failurePolicy.maxRestarts (0: the base's).
	Retries int32
	// GracePeriod sets the Launcher's and the Workers'
	// terminationGracePeriodSeconds (nil: the base's).
	GracePeriod *int64
	// ServiceAccount gives the Launcher and the Workers that
	// ServiceAccount and its token ("": the base's, no token).
	ServiceAccount string
}

// Derive makes the per-job TrainingRuntime of job name in namespace: base
// with the overrides applied. Trainer V2.3 applies a TrainJob's image only
// to the Launcher and its resourcesPerNode only to the Launcher (or to
// every pod when the Launcher hosts ranks), and runtimePatches cannot set
// either (kubeflow/trainer#2650), so a job that needs its own Worker image
// or Worker resources carries them in a runtime of its own.
func Derive(base *trainer.ClusterTrainingRuntime, job, namespace string, o Overrides) *trainer.TrainingRuntime {
	rt := &trainer.TrainingRuntime{
		TypeMeta: metav1.TypeMeta{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainingRuntimeKind},
		ObjectMeta: metav1.ObjectMeta{
			Name: job, Namespace: namespace,
			Labels:     map[string]string{api.JobLabel: job, api.BaseRuntimeLabel: base.Name},
			Finalizers: []string{api.JobRuntimeFinalizer},
			Annotations: map[string]string{
				api.DescriptionAnnotation: fmt.Sprintf("runtime of MPI job %s: %s with the job's images and resources (deleted with the job)", job, base.Name),
			},
		},
		Spec: *base.Spec.DeepCopy(),
	}
	// Trainer and the Kubeflow SDK read the framework label; mpijob's
	// runtime label stays off so the copy is not listed as a runtime.
	for k, v := range base.Labels {
		if _, ours := rt.Labels[k]; !ours && k != api.RuntimeLabel && k != api.BaseRuntimeKindLabel {
			rt.Labels[k] = v
		}
	}
	if runtimes.IsNamespaced(base) {
		rt.Labels[api.BaseRuntimeKindLabel] = trainer.TrainingRuntimeKind
	}
	// The base's annotations (MPI implementation, runtime policy) hold for
	// the copy: the diagnosis reads them from the job's runtime.
	for k, v := range base.Annotations {
		if k != api.DescriptionAnnotation {
			rt.Annotations[k] = v
		}
	}
	if o.Retries > 0 {
		if rt.Spec.Template.Spec.FailurePolicy == nil {
			rt.Spec.Template.Spec.FailurePolicy = &jobsetv1alpha2.FailurePolicy{}
		}
		rt.Spec.Template.Spec.FailurePolicy.MaxRestarts = o.Retries
	}
	asNode := runtimes.LauncherAsNode(&base.Spec)
	for i := range rt.Spec.Template.Spec.ReplicatedJobs {
		rj := &rt.Spec.Template.Spec.ReplicatedJobs[i]
		image, res := o.WorkerImage, o.Worker
		if rj.Name == api.LauncherJob {
			image, res = o.LauncherImage, o.Launcher
			if asNode {
				res = o.Worker
			}
		} else if rj.Name != api.WorkerJob {
			continue
		}
		pod := &rj.Template.Spec.Template.Spec
		if o.GracePeriod != nil {
			pod.TerminationGracePeriodSeconds = ptr.To(*o.GracePeriod)
		}
		if o.ServiceAccount != "" {
			pod.ServiceAccountName, pod.AutomountServiceAccountToken = o.ServiceAccount, ptr.To(true)
		}
		pod.Volumes = append(pod.Volumes, o.Volumes...)
		for c := range pod.Containers {
			if pod.Containers[c].Name != api.NodeContainer {
				continue
			}
			if image != "" {
				pod.Containers[c].Image = image
			}
			SetResources(&pod.Containers[c].Resources, res)
			for _, e := range o.Env {
				pod.Containers[c].Env = setEnv(pod.Containers[c].Env, e)
			}
			pod.Containers[c].VolumeMounts = append(pod.Containers[c].VolumeMounts, o.Mounts...)
		}
	}
	return rt
}

// SetResources sets each resource of rl as both request and limit, so what
// is accounted is what runs (and the Kubeflow SDK, which reads a node
// container's limits for its device, finds cpu or a GPU there). A zero
// count removes the resource.
func SetResources(r *corev1.ResourceRequirements, rl corev1.ResourceList) {
	for k, q := range rl {
		if q.IsZero() {
			delete(r.Requests, k)
			delete(r.Limits, k)
			continue
		}
		if r.Requests == nil {
			r.Requests = corev1.ResourceList{}
		}
		if r.Limits == nil {
			r.Limits = corev1.ResourceList{}
		}
		r.Requests[k], r.Limits[k] = q, q
	}
}

// NodeSelectorPatch is the runtime patch that sends the Launcher and the
// Workers to nodes with the labels sel.
func NodeSelectorPatch(sel map[string]string) trainer.RuntimePatch {
	return PodPatch{NodeSelector: sel}.RuntimePatch()
}

func validateName(n string) error {
	if n == "" {
		return errorf("name", "", "is empty: give the job a name, e.g. hello")
	}
	if len(n) > api.MaxJobNameLength {
		return errorf("name", n, "is %d characters; use at most %d (JobSet names the Launcher pod %s-launcher-0-0-xxxxx, at most 63)", len(n), api.MaxJobNameLength, n)
	}
	if errs := validation.IsDNS1123Label(n); len(errs) > 0 {
		return errorf("name", n, "is not a valid job name: use lower-case letters, digits and '-', starting and ending with a letter or digit")
	}
	return nil
}

func validateImage(field, ref string) error {
	if ref == "" {
		return nil
	}
	if strings.TrimSpace(ref) != ref || ref == "" {
		return errorf(field, ref, "is not an image reference: remove the spaces, e.g. ghcr.io/mpijob/openmpi:4.1")
	}
	if _, err := name.ParseReference(ref, name.WeakValidation); err != nil {
		return errorf(field, ref, "is not an image reference: use e.g. ghcr.io/mpijob/openmpi:4.1 (lower-case repository, optional :tag or @sha256:digest)")
	}
	return nil
}

// parseResources reads a map of resource name to quantity. Names are
// cpu, memory, ephemeral-storage, hugepages-* or extended resources with a
// domain (nvidia.com/gpu); a bare "gpu" is refused because no node offers it.
func parseResources(field string, in map[string]string, worker bool) (corev1.ResourceList, error) {
	out := corev1.ResourceList{}
	for _, k := range slices.Sorted(maps.Keys(in)) {
		v := in[k]
		f := field + "." + k
		switch {
		case k == "cpu" || k == "memory" || k == "ephemeral-storage" || strings.HasPrefix(k, "hugepages-"):
		case strings.Contains(k, "/"):
			if errs := validation.IsQualifiedName(k); len(errs) > 0 {
				return nil, errorf(f, v, "%q is not a resource name: use a domain and a name, e.g. nvidia.com/gpu", k)
			}
			if !worker {
				return nil, errorf(f, v, "the Launcher runs mpirun and hosts no ranks: give %s to the Workers (resources_per_worker)", k)
			}
		default:
			hint := "cpu, memory or an extended resource such as nvidia.com/gpu"
			if strings.Contains(strings.ToLower(k), "gpu") {
				hint = "nvidia.com/gpu or amd.com/gpu"
			}
			return nil, errorf(f, v, "no node offers a resource named %q: use %s", k, hint)
		}
		q, err := resource.ParseQuantity(strings.TrimSpace(v))
		if err != nil || q.Sign() < 0 {
			return nil, errorf(f, v, "is not a quantity: use e.g. %s", example(k))
		}
		if q.IsZero() && (k == "cpu" || k == "memory") {
			return nil, errorf(f, v, "must be more than 0: use e.g. %s", example(k))
		}
		if k == "memory" {
			if problem := TooLittleMemory(q); problem != "" {
				return nil, errorf(f, v, "%s", problem)
			}
		}
		if strings.Contains(k, "/") && q.MilliValue()%1000 != 0 {
			return nil, errorf(f, v, "must be a whole number of devices, e.g. 1")
		}
		out[corev1.ResourceName(k)] = q
	}
	return out, nil
}

// MinMemory is the least memory a Launcher or Worker may ask for: sshd,
// mpirun and the kubelet's in-memory volumes (the SSH key Secret, sized by
// the pod's memory limit) need more than a few bytes, and a bare number is
// bytes ("--memory 10" is 10 bytes).
var MinMemory = resource.MustParse("32Mi")

// TooLittleMemory says what is wrong with a memory of q ("" when it is at
// least MinMemory); admission says the same of a job written by hand.
func TooLittleMemory(q resource.Quantity) string {
	if q.Cmp(MinMemory) >= 0 {
		return ""
	}
	return fmt.Sprintf("is less than %s, too little for a pod (memory counts bytes unless it has a unit such as Mi or Gi): use e.g. %s", MinMemory.String(), example("memory"))
}

func example(k string) string {
	switch k {
	case "cpu":
		return "4 or 500m"
	case "memory", "ephemeral-storage":
		return "16Gi or 300Mi"
	}
	return "1"
}

func first(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

func setEnv(env []corev1.EnvVar, e corev1.EnvVar) []corev1.EnvVar {
	for i := range env {
		if env[i].Name == e.Name {
			env[i] = *e.DeepCopy()
			return env
		}
	}
	return append(env, *e.DeepCopy())
}

// withPath is NAME or NAME:PATH, as the user gave a mount.
func withPath(name, path string) string {
	if path == "" {
		return name
	}
	return name + ":" + path
}

// validateStorage checks the data connections, PVCs and ConfigMaps a job
// names (their existence and keys are the cluster's to say: CheckStorage).
// resumeURI is the folder a job resumes from (ResumeFrom): another job's
// checkpoint place on this job's first storage, or the URI given.
func resumeURI(in Input) (string, error) {
	r := in.ResumeFrom
	if r == "" {
		return "", nil
	}
	if len(in.DataConnections) == 0 && len(in.PVCs) == 0 {
		return "", errorf("resume_from", r, "a job reads a checkpoint through its data connection or PVC, and this one has neither: add a data connection (--data-connection) or a PVC (--pvc)")
	}
	if scheme, rest, ok := strings.Cut(r, "://"); ok {
		switch {
		case scheme != "s3" && scheme != "file":
			return "", errorf("resume_from", r, "is not a checkpoint folder: use another job's name, s3://BUCKET/PATH/ or file:///PATH/")
		case scheme == "s3" && (strings.HasPrefix(rest, "/") || !strings.Contains(strings.TrimSuffix(rest, "/"), "/")):
			return "", errorf("resume_from", r, "names no folder in a bucket: use s3://BUCKET/PATH/, e.g. s3://my-bucket/other-job/checkpoints/")
		case scheme == "file" && (!strings.HasPrefix(rest, "/") || strings.Contains(rest, "..") || rest == "/"):
			return "", errorf("resume_from", r, "is not an absolute folder: use file:///PATH/ on the job's PVC, e.g. file:///mnt/shared-data/other-job/checkpoints/")
		case strings.ContainsAny(r, " \t\n\"'$`"):
			return "", errorf("resume_from", r, "has a space, quote or '$': give the folder's URI as it is")
		}
		if !strings.HasSuffix(r, "/") {
			r += "/"
		}
		return r, nil
	}
	if errs := validation.IsDNS1123Label(r); len(errs) > 0 || len(r) > api.MaxJobNameLength {
		return "", errorf("resume_from", r, "is neither a job name nor a URI: use another MPI job's name, s3://BUCKET/PATH/ or file:///PATH/")
	}
	if r == in.Name {
		return "", errorf("resume_from", r, "is this job: a job resumes from its own checkpoints by itself; name another job")
	}
	return dataconn.CheckpointsOf(r, in.DataConnections, in.PVCs), nil
}

// validateRegistration checks what registering the model on success
// needs of the job itself: a data connection to find the model on. The
// name's form and the registry's rules are checked by admission (and by
// kubectl mpijob and the SDK before they send the job).
func validateRegistration(in Input) error {
	switch {
	case in.RegisterModel == "" && in.RegisterArtifact != "":
		return errorf("register_artifact", in.RegisterArtifact, "names the model file of a registration: give register_model NAME[:VERSION] too, or leave it out")
	case in.RegisterModel == "":
		return nil
	case strings.TrimSpace(in.RegisterModel) != in.RegisterModel || in.RegisterModel == ":":
		return errorf("register_model", in.RegisterModel, "give the model as NAME[:VERSION], without spaces")
	case len(in.DataConnections) == 0:
		return errorf("register_model", in.RegisterModel, "registering the model when the job succeeds reads it from the job's data connection: add a data connection (--data-connection), or register a PVC job's model after it succeeds with kubectl mpijob register")
	case strings.Contains(in.RegisterArtifact, "/"):
		return errorf("register_artifact", in.RegisterArtifact, "name a file among the job's artifacts, without a folder, e.g. model.onnx")
	}
	return nil
}

func validateStorage(in Input) error {
	seen := map[string]bool{}
	for _, c := range in.DataConnections {
		if errs := validation.IsDNS1123Subdomain(c); len(errs) > 0 {
			return errorf("data_connections", c, "is not a data connection name: use the connection's Secret name, lower-case letters, digits, '-' and '.' (kubectl get secrets -l %s=true)", dataconn.DashboardLabel)
		}
		if seen[c] {
			return errorf("data_connections", c, "is named twice: name each data connection once")
		}
		seen[c] = true
	}
	// PVCs and ConfigMaps: a valid name and path, each named once, each
	// path taken once.
	type mount struct{ field, value, name, path, problem, twice string }
	var all []mount
	for _, p := range in.PVCs {
		all = append(all, mount{"pvcs", withPath(p.Claim, p.MountPath), p.Claim, dataconn.MountPathOf(p), dataconn.ValidatePVC(p),
			"claim " + p.Claim + " is named twice: mount each PVC once"})
	}
	for _, c := range in.ConfigMaps {
		all = append(all, mount{"config_maps", withPath(c.Name, c.MountPath), c.Name, dataconn.ConfigMapPathOf(c), dataconn.ValidateConfigMap(c),
			"ConfigMap " + c.Name + " is named twice: mount each ConfigMap once"})
	}
	named, paths := map[string]bool{}, map[string]bool{}
	for _, m := range all {
		switch {
		case m.problem != "":
			return errorf(m.field, m.value, "%s", m.problem)
		case named[m.field+"/"+m.name]:
			return errorf(m.field, m.value, "%s", m.twice)
		case paths[m.path]:
			taken := "another PVC"
			if m.field == "config_maps" {
				taken = "another PVC or ConfigMap"
			}
			return errorf(m.field, m.value, "mount path %s is taken by %s: give each its own path", m.path, taken)
		}
		named[m.field+"/"+m.name], paths[m.path] = true, true
	}
	return nil
}

// checkEnvSource accepts a variable with a value, or one read from a key
// of a Secret (env_from_secret / --env-from-secret): a secret's value then
// never sits in the TrainJob, where every viewer of the job reads it.
func checkEnvSource(e corev1.EnvVar) error {
	if e.ValueFrom == nil {
		return nil
	}
	ref := e.ValueFrom.SecretKeyRef
	if ref == nil || e.ValueFrom.ConfigMapKeyRef != nil || e.ValueFrom.FieldRef != nil || e.ValueFrom.ResourceFieldRef != nil || e.ValueFrom.FileKeyRef != nil {
		return errorf("env", e.Name, "takes a value or a Secret's key only (valueFrom.secretKeyRef), e.g. --env-from-secret %s=my-secret:key", e.Name)
	}
	if e.Value != "" {
		return errorf("env", e.Name, "has both a value and a Secret's key: give one")
	}
	if errs := validation.IsDNS1123Subdomain(ref.Name); len(errs) > 0 {
		return errorf("env_from_secret", e.Name+"="+ref.Name+":"+ref.Key, "names no valid Secret: use the Secret's name, lower-case letters, digits and '-', e.g. s3-credentials")
	}
	if errs := validation.IsConfigMapKey(ref.Key); len(errs) > 0 {
		return errorf("env_from_secret", e.Name+"="+ref.Name+":"+ref.Key, "names no valid key of the Secret: use letters, digits, '-', '_' or '.', e.g. secret-key")
	}
	return nil
}
