package jobspec

import (
	"fmt"
	"slices"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/dataconn"
	"github.com/mpijob/mpijob/pkg/queue"
	"github.com/mpijob/mpijob/pkg/runtimes"
)

// legacyPatchManagers are runtime patches that earlier kubectl-mpijob and
// SDK versions wrote for the node selector.
var legacyPatchManagers = []string{"mpijob.dev/kubectl-mpijob", "mpijob.dev/python-sdk"}

// InputOf reads back the Input of an existing job, whichever way it was
// made (CLI, SDK, dashboard or YAML): clone and the dashboard's "Edit and
// resubmit" start from it. rt is the job's per-job runtime (nil when it
// runs on base directly). Runtime patches the builder does not write are
// returned as they are, to be kept.
func InputOf(tj *trainer.TrainJob, rt *trainer.TrainingRuntime, base *trainer.ClusterTrainingRuntime) (Input, []trainer.RuntimePatch) {
	in := Input{Name: tj.Name, Namespace: tj.Namespace, Runtime: base.Name, Queue: tj.Labels[queue.NameLabel],
		Priority: tj.Labels[queue.PriorityLabel], Description: tj.Annotations[api.DescriptionAnnotation],
		Timeout: FormatTimeout(tj.Spec.ActiveDeadlineSeconds), EndStuckAfter: tj.Annotations[runtimes.EndStuckAfterAnnotation],
		RegisterModel: tj.Annotations[api.RegisterModelAnnotation], RegisterArtifact: tj.Annotations[api.RegisterArtifactAnnotation]}
	asNode := runtimes.LauncherAsNode(&base.Spec)
	numNodes := ptr.Deref(base.Spec.MLPolicy.NumNodes, 1)
	if tr := tj.Spec.Trainer; tr != nil {
		if tr.NumNodes != nil {
			numNodes = *tr.NumNodes
		}
		in.SlotsPerWorker = ptr.Deref(tr.NumProcPerNode, 0)
		in.Command = tr.Command
		in.Env = tr.Env
		in.Image = ptr.Deref(tr.Image, "")
		if tr.ResourcesPerNode != nil {
			in.ResourcesPerWorker = quantities(tr.ResourcesPerNode.Requests, tr.ResourcesPerNode.Limits)
		}
	}
	in.Workers = numNodes
	if asNode {
		in.Workers = max(numNodes-1, 1)
	}
	var kept []trainer.RuntimePatch
	for _, p := range tj.Spec.RuntimePatches {
		switch {
		case p.Manager == PatchManager || contains(legacyPatchManagers, p.Manager):
			pp := podPatchOf(p)
			in.NodeSelector, in.Tolerations, in.ImagePullSecrets = pp.NodeSelector, pp.Tolerations, pp.ImagePullSecrets
		case p.Manager == "kueue.x-k8s.io/manager":
			// Kueue adds its own again when it admits the new job.
		default:
			kept = append(kept, p)
		}
	}
	if rt == nil {
		return in, kept
	}
	if fp := rt.Spec.Template.Spec.FailurePolicy; fp != nil && !sameRestarts(rt.Spec.Template.Spec.FailurePolicy, base.Spec.Template.Spec.FailurePolicy) {
		in.Retries = fp.MaxRestarts
	}
	in.ServiceAccount = ServiceAccountOf(&rt.Spec)
	if g := GracePeriodOf(&rt.Spec); g != nil && !equality.Semantic.DeepEqual(g, GracePeriodOf(&base.Spec)) {
		in.GracePeriod = FormatTimeout(*g)
	}
	baseLauncher, baseWorker := nodeContainers(&base.Spec)
	launcher, worker := nodeContainers(&rt.Spec)
	if worker != nil && baseWorker != nil {
		if worker.Image != baseWorker.Image {
			in.WorkerImage = worker.Image
		}
		in.ResourcesPerWorker = changed(baseWorker.Resources, worker.Resources)
	}
	in.DataConnections, in.PVCs = StorageOf(&rt.Spec)
	in.ConfigMaps = ConfigMapsOf(&rt.Spec)
	if worker != nil {
		in.ResumeFrom = resumeInputOf(dataconn.ResumeOf(worker.Env), in.DataConnections, in.PVCs)
	}
	if launcher != nil && baseLauncher != nil {
		if launcher.Image != baseLauncher.Image {
			in.LauncherImage = launcher.Image
		}
		if !asNode {
			in.LauncherResources = changed(baseLauncher.Resources, launcher.Resources)
		}
	}
	if in.LauncherImage != "" && in.LauncherImage == in.WorkerImage {
		in.Image, in.LauncherImage, in.WorkerImage = in.LauncherImage, "", ""
	}
	return in, kept
}

// resumeInputOf is the ResumeFrom that gives uri: the other job's name
// when uri is its checkpoint place on this job's storage, else uri.
func resumeInputOf(uri string, conns []string, pvcs []dataconn.PVC) string {
	if uri == "" {
		return ""
	}
	var head, tail string
	switch {
	case len(conns) > 0:
		head, tail = fmt.Sprintf("s3://$(%s)/", dataconn.Bucket), "/"+dataconn.CheckpointDir
	case len(pvcs) > 0:
		head, tail = "file://"+dataconn.MountPathOf(pvcs[0])+"/", "/"+dataconn.CheckpointDir
	}
	if head != "" && strings.HasPrefix(uri, head) && strings.HasSuffix(uri, tail) {
		if job := strings.TrimSuffix(strings.TrimPrefix(uri, head), tail); job != "" && !strings.Contains(job, "/") {
			return job
		}
	}
	return uri
}

// StorageOf reads back the data connections and PVCs of a job's runtime.
func StorageOf(spec *trainer.TrainingRuntimeSpec) ([]string, []dataconn.PVC) {
	_, worker := nodeContainers(spec)
	if worker == nil {
		return nil, nil
	}
	return dataconn.ConnectionsOf(worker.Env), pvcsOf(spec, worker)
}

// ConfigMapsOf reads back the ConfigMaps a per-job runtime mounts: the
// Worker node container's mounts of the ConfigMap volumes dataconn.Volumes
// names.
func ConfigMapsOf(spec *trainer.TrainingRuntimeSpec) []dataconn.ConfigMap {
	_, worker := nodeContainers(spec)
	if worker == nil {
		return nil
	}
	var out []dataconn.ConfigMap
	for _, m := range builderMounts(spec, worker, func(v corev1.Volume) string {
		if v.ConfigMap == nil || v.Name != dataconn.ConfigMapVolumeName(v.ConfigMap.Name) {
			return ""
		}
		return v.ConfigMap.Name
	}) {
		c := dataconn.ConfigMap{Name: m.source}
		if m.path != dataconn.DefaultConfigMapPath(c.Name) {
			c.MountPath = m.path
		}
		out = append(out, c)
	}
	return out
}

// pvcsOf reads back the PVCs of a per-job runtime: the node container's
// mounts of the Worker pod's PersistentVolumeClaim volumes that
// dataconn.Volumes names.
func pvcsOf(spec *trainer.TrainingRuntimeSpec, worker *corev1.Container) []dataconn.PVC {
	var out []dataconn.PVC
	for _, m := range builderMounts(spec, worker, func(v corev1.Volume) string {
		if v.PersistentVolumeClaim == nil || v.Name != dataconn.VolumeName(v.PersistentVolumeClaim.ClaimName) {
			return ""
		}
		return v.PersistentVolumeClaim.ClaimName
	}) {
		p := dataconn.PVC{Claim: m.source}
		if m.path != dataconn.DefaultMountPath(p.Claim) {
			p.MountPath = m.path
		}
		out = append(out, p)
	}
	return out
}

// builderMount is a volume the builder added: what it mounts (a claim, a
// ConfigMap) and where.
type builderMount struct{ source, path string }

// builderMounts lists the Worker node container's mounts of the Worker
// pod's volumes that source names ("": not one of the builder's).
func builderMounts(spec *trainer.TrainingRuntimeSpec, worker *corev1.Container, source func(corev1.Volume) string) []builderMount {
	var out []builderMount
	for _, rj := range spec.Template.Spec.ReplicatedJobs {
		if rj.Name != api.WorkerJob {
			continue
		}
		for _, v := range rj.Template.Spec.Template.Spec.Volumes {
			src := source(v)
			if src == "" {
				continue
			}
			for _, m := range worker.VolumeMounts {
				if m.Name == v.Name {
					out = append(out, builderMount{source: src, path: m.MountPath})
				}
			}
		}
	}
	return out
}

// Owned returns rt's owner references with tj added, so Kubernetes
// deletes it with the job. The job's deletion does not wait for it
// (no blockOwnerDeletion): Trainer keeps a finalizer on a runtime while a
// TrainJob uses it, so a foreground delete of the job would never end.
func Owned(rt *trainer.TrainingRuntime, tj *trainer.TrainJob) []metav1.OwnerReference {
	ref := metav1.OwnerReference{
		APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind,
		Name: tj.Name, UID: tj.UID,
	}
	out := []metav1.OwnerReference{}
	for _, r := range rt.OwnerReferences {
		if r.UID != tj.UID {
			out = append(out, r)
		}
	}
	return append(out, ref)
}

// IsDerived reports whether rt is a per-job runtime of mpijob.
func IsDerived(labels map[string]string) bool { return runtimes.IsPerJob(labels) }

// Normalize returns the spec of a per-job runtime with its node
// containers' images and resources set back to base's, and the data
// connections' variables and the PVCs' volumes the builder adds taken out:
// equal to base.Spec exactly when the runtime changes nothing else. Admission uses it so a
// per-job runtime cannot carry anything its base's policy would not allow.
func Normalize(spec *trainer.TrainingRuntimeSpec, base *trainer.TrainingRuntimeSpec) *trainer.TrainingRuntimeSpec {
	out := spec.DeepCopy()
	// Retries: a failure policy that only restarts the whole job, as the
	// builder writes it (the API server defaults its strategy to
	// Recreate), is the base's.
	// The base's own rules (the shipped runtimes' EndedByMPIJobManager)
	// stay as they are beside the builder's maxRestarts.
	var baseRules []jobsetv1alpha2.FailurePolicyRule
	if bp := base.Template.Spec.FailurePolicy; bp != nil {
		baseRules = bp.Rules
	}
	if fp := out.Template.Spec.FailurePolicy; fp != nil && equality.Semantic.DeepEqual(fp.Rules, baseRules) && (fp.RestartStrategy == "" || fp.RestartStrategy == jobsetv1alpha2.Recreate) {
		out.Template.Spec.FailurePolicy = base.Template.Spec.FailurePolicy.DeepCopy()
	}
	baseLauncher, baseWorker := nodeContainers(base)
	for i := range out.Template.Spec.ReplicatedJobs {
		rj := &out.Template.Spec.ReplicatedJobs[i]
		from := baseWorker
		if rj.Name == api.LauncherJob {
			from = baseLauncher
		}
		if from == nil {
			continue
		}
		pod := &rj.Template.Spec.Template.Spec
		// The grace period, within what a job may ask for, is the base's.
		if g := pod.TerminationGracePeriodSeconds; g != nil && *g >= 1 && *g <= MaxGracePeriod {
			pod.TerminationGracePeriodSeconds = gracePeriodOf(base, rj.Name)
		}
		// A ServiceAccount with its token, as the builder sets it, is the
		// base's (admission checks the user may use it: ServiceAccountOf).
		if pod.ServiceAccountName != "" && ptr.Deref(pod.AutomountServiceAccountToken, false) {
			if bp := podOf(base, rj.Name); bp != nil {
				pod.ServiceAccountName, pod.AutomountServiceAccountToken = bp.ServiceAccountName, bp.AutomountServiceAccountToken
			}
		}
		removed := map[string]bool{}
		pod.Volumes = slices.DeleteFunc(pod.Volumes, func(v corev1.Volume) bool {
			pvc := v.PersistentVolumeClaim != nil && v.Name == dataconn.VolumeName(v.PersistentVolumeClaim.ClaimName)
			// A ConfigMap as the builder mounts it: the whole map, files of
			// the default mode, nothing of another source.
			cm := v.ConfigMap != nil && v.Name == dataconn.ConfigMapVolumeName(v.ConfigMap.Name) &&
				len(v.ConfigMap.Items) == 0 && v.ConfigMap.DefaultMode == nil
			removed[v.Name] = pvc || cm
			return pvc || cm
		})
		if len(pod.Volumes) == 0 {
			pod.Volumes = nil
		}
		for c := range pod.Containers {
			ct := &pod.Containers[c]
			if ct.Name == api.NodeContainer {
				ct.Image = from.Image
				ct.Resources = *from.Resources.DeepCopy()
				ct.Env = slices.DeleteFunc(ct.Env, dataconn.IsJobEnv)
				ct.VolumeMounts = slices.DeleteFunc(ct.VolumeMounts, func(m corev1.VolumeMount) bool { return removed[m.Name] })
				if len(ct.Env) == 0 {
					ct.Env = nil
				}
				if len(ct.VolumeMounts) == 0 {
					ct.VolumeMounts = nil
				}
			}
		}
	}
	return out
}

// GracePeriodOf is the Workers' terminationGracePeriodSeconds in spec (the
// builder gives the Launcher the same); nil when the runtime sets none.
func GracePeriodOf(spec *trainer.TrainingRuntimeSpec) *int64 {
	return gracePeriodOf(spec, api.WorkerJob)
}

func gracePeriodOf(spec *trainer.TrainingRuntimeSpec, replicatedJob string) *int64 {
	if p := podOf(spec, replicatedJob); p != nil && p.TerminationGracePeriodSeconds != nil {
		return ptr.To(*p.TerminationGracePeriodSeconds)
	}
	return nil
}

// ServiceAccountOf is the ServiceAccount the Workers of spec run as ("":
// the namespace's default, or none set).
func ServiceAccountOf(spec *trainer.TrainingRuntimeSpec) string {
	if p := podOf(spec, api.WorkerJob); p != nil {
		return p.ServiceAccountName
	}
	return ""
}

// ServiceAccountsOf are the ServiceAccounts spec's pods name, each once.
func ServiceAccountsOf(spec *trainer.TrainingRuntimeSpec) []string {
	var out []string
	for i := range spec.Template.Spec.ReplicatedJobs {
		if sa := spec.Template.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec.ServiceAccountName; sa != "" && !slices.Contains(out, sa) {
			out = append(out, sa)
		}
	}
	return out
}

// TokenAccountsOf are the ServiceAccounts whose token spec's pods get,
// besides those they name (ServiceAccountsOf): a pod that mounts a token
// (automountServiceAccountToken not false, or a projected
// serviceAccountToken volume) gets its ServiceAccount's, "default" when it
// names none.
func TokenAccountsOf(spec *trainer.TrainingRuntimeSpec) []string {
	out := ServiceAccountsOf(spec)
	for i := range spec.Template.Spec.ReplicatedJobs {
		pod := &spec.Template.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec
		if ptr.Deref(pod.AutomountServiceAccountToken, true) || projectsToken(pod.Volumes) {
			out = addAccount(out, pod.ServiceAccountName)
		}
	}
	return out
}

// PatchAccountsOf are the ServiceAccounts a TrainJob's runtime patches
// give its pods, by name or by a projected serviceAccountToken volume (of
// the patch's ServiceAccount, else the runtime pod's, else "default").
func PatchAccountsOf(tj *trainer.TrainJob, spec *trainer.TrainingRuntimeSpec) []string {
	var out []string
	for _, p := range tj.Spec.RuntimePatches {
		if p.TrainingRuntimeSpec == nil || p.TrainingRuntimeSpec.Template == nil || p.TrainingRuntimeSpec.Template.Spec == nil {
			continue
		}
		for _, rj := range p.TrainingRuntimeSpec.Template.Spec.ReplicatedJobs {
			if rj.Template == nil || rj.Template.Spec == nil || rj.Template.Spec.Template == nil || rj.Template.Spec.Template.Spec == nil {
				continue
			}
			ps := rj.Template.Spec.Template.Spec
			sa := ptr.Deref(ps.ServiceAccountName, "")
			if sa != "" {
				out = addAccount(out, sa)
			}
			if projectsToken(ps.Volumes) {
				if sa == "" {
					if pod := podOf(spec, rj.Name); pod != nil {
						sa = pod.ServiceAccountName
					}
				}
				out = addAccount(out, sa)
			}
		}
	}
	return out
}

func projectsToken(vols []corev1.Volume) bool {
	for _, v := range vols {
		if v.Projected == nil {
			continue
		}
		for _, src := range v.Projected.Sources {
			if src.ServiceAccountToken != nil {
				return true
			}
		}
	}
	return false
}

func addAccount(out []string, sa string) []string {
	if sa == "" {
		sa = "default"
	}
	if !slices.Contains(out, sa) {
		out = append(out, sa)
	}
	return out
}

func podOf(spec *trainer.TrainingRuntimeSpec, replicatedJob string) *corev1.PodSpec {
	for i := range spec.Template.Spec.ReplicatedJobs {
		if rj := &spec.Template.Spec.ReplicatedJobs[i]; rj.Name == replicatedJob {
			return &rj.Template.Spec.Template.Spec
		}
	}
	return nil
}

// GracePeriodErrors refuses a per-job runtime whose pods would take
// longer than MaxGracePeriod to stop.
func GracePeriodErrors(rt *trainer.TrainingRuntime) field.ErrorList {
	var errs field.ErrorList
	rjs := field.NewPath("spec", "template", "spec", "replicatedJobs")
	for i := range rt.Spec.Template.Spec.ReplicatedJobs {
		if g := rt.Spec.Template.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec.TerminationGracePeriodSeconds; g != nil && *g > MaxGracePeriod {
			errs = append(errs, field.Invalid(rjs.Index(i).Child("template", "spec", "template", "spec", "terminationGracePeriodSeconds"), *g,
				fmt.Sprintf("a job's pods may take at most %d s (%s) to stop: a pod that takes longer holds its node that long; save checkpoints more often instead (--grace-period)", MaxGracePeriod, FormatTimeout(MaxGracePeriod))))
		}
	}
	return errs
}

// sameRestarts reports whether two failure policies restart a job as often.
func sameRestarts(a, b *jobsetv1alpha2.FailurePolicy) bool {
	var an, bn int32
	if a != nil {
		an = a.MaxRestarts
	}
	if b != nil {
		bn = b.MaxRestarts
	}
	return an == bn
}

// SameSpec reports whether two runtime specs are semantically equal.
func SameSpec(a, b *trainer.TrainingRuntimeSpec) bool { return equality.Semantic.DeepEqual(a, b) }

func nodeContainers(spec *trainer.TrainingRuntimeSpec) (launcher, worker *corev1.Container) {
	for i := range spec.Template.Spec.ReplicatedJobs {
		rj := &spec.Template.Spec.ReplicatedJobs[i]
		for c := range rj.Template.Spec.Template.Spec.Containers {
			ct := &rj.Template.Spec.Template.Spec.Containers[c]
			if ct.Name != api.NodeContainer {
				continue
			}
			switch rj.Name {
			case api.LauncherJob:
				launcher = ct
			case api.WorkerJob:
				worker = ct
			}
		}
	}
	return launcher, worker
}

// changed lists the resources whose request or limit differs from base's,
// with the value the job asked for (the limit where there is one).
func changed(base, got corev1.ResourceRequirements) map[string]string {
	out := map[string]string{}
	for _, rl := range []corev1.ResourceList{got.Requests, got.Limits} {
		for k, q := range rl {
			br, bl := base.Requests[k], base.Limits[k]
			gr, gl := got.Requests[k], got.Limits[k]
			if br.Cmp(gr) != 0 || bl.Cmp(gl) != 0 {
				out[string(k)] = q.String()
			}
		}
	}
	for _, rl := range []corev1.ResourceList{base.Requests, base.Limits} {
		for k := range rl {
			if _, ok := got.Requests[k]; !ok {
				if _, ok := got.Limits[k]; !ok {
					out[string(k)] = "0"
				}
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func quantities(rls ...corev1.ResourceList) map[string]string {
	out := map[string]string{}
	for _, rl := range rls {
		for k, q := range rl {
			out[string(k)] = q.String()
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// JobEnvErrors checks the variables the builder sets for a per-job
// runtime's storage (dataconn.Env): MPIJOB_JOB_NAME, MPIJOB_OUTPUT_URI and
// MPIJOB_CHECKPOINT_URI must name the job the runtime belongs to. A runtime copied from another
// job's exported YAML, renamed but with the other job's values, would write
// its artifacts into that job's.
func JobEnvErrors(rt *trainer.TrainingRuntime) field.ErrorList {
	job := rt.Labels[api.JobLabel]
	var errs field.ErrorList
	eachJobEnv(&rt.Spec, job, func(path *field.Path, e *corev1.EnvVar, want string) {
		if e.Value != want {
			errs = append(errs, field.Invalid(path.Child("value"), e.Value, fmt.Sprintf(
				"%s must name this runtime's job %s, or the job's artifacts would go to another job's: set it to %q (kubectl mpijob create -f sets it for you)", e.Name, job, want)))
		}
	})
	return errs
}

// KueuePatchManager is the runtime patch Kueue writes on a TrainJob it
// admits; a copy of the job must leave it out (Kueue adds its own again,
// and refuses a second one as a duplicate).
const KueuePatchManager = "kueue.x-k8s.io/manager"

// Exported makes a TrainJob read from an export (kubectl get -o yaml) one
// to create anew: what the cluster wrote on the job it was exported from
// (its identity, status and Kueue's runtime patch) is left out; what the
// user wrote is kept.
func Exported(tj *trainer.TrainJob) {
	clearServerFields(&tj.ObjectMeta)
	tj.Status = trainer.TrainJobStatus{}
	tj.Spec.RuntimePatches = slices.DeleteFunc(tj.Spec.RuntimePatches, func(p trainer.RuntimePatch) bool { return p.Manager == KueuePatchManager })
	if len(tj.Spec.RuntimePatches) == 0 {
		tj.Spec.RuntimePatches = nil
	}
}

// ExportedRuntime does for a per-job runtime read from an export what
// Exported does for its TrainJob; its owner, the job it was exported from,
// is left out too (the new job adopts it).
func ExportedRuntime(rt *trainer.TrainingRuntime) {
	clearServerFields(&rt.ObjectMeta)
	rt.OwnerReferences = nil
}

// clearServerFields leaves out of an exported object's metadata what the
// API server wrote on the object it was read from.
func clearServerFields(m *metav1.ObjectMeta) {
	m.ResourceVersion, m.UID, m.Generation, m.CreationTimestamp = "", "", 0, metav1.Time{}
	m.ManagedFields, m.DeletionTimestamp = nil, nil
}

// CopyRuntime gives job a runtime of its own when its TrainJob names the
// per-job runtime of another job (an export renamed without its runtime):
// a copy of src, the other job's runtime, made the TrainJob's own by
// Retarget. It reports whether it did.
func CopyRuntime(job *Job, src *trainer.TrainingRuntime) bool {
	tj := job.TrainJob
	if job.Runtime != nil || src == nil || !IsDerived(src.Labels) || src.Labels[api.JobLabel] == tj.Name {
		return false
	}
	rt := src.DeepCopy()
	ExportedRuntime(rt)
	rt.TypeMeta = metav1.TypeMeta{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainingRuntimeKind}
	rt.Namespace, rt.Finalizers = tj.Namespace, []string{api.JobRuntimeFinalizer}
	job.Runtime = rt
	Retarget(job)
	return true
}

// Retarget makes job's per-job runtime the TrainJob's own when a file
// names the TrainJob anew but keeps the runtime of the job it was exported
// from: the runtime takes the TrainJob's name (and its job label), the
// TrainJob refers to it, and the storage variables name the new job.
func Retarget(job *Job) {
	rt, tj := job.Runtime, job.TrainJob
	if rt == nil || tj == nil || !IsDerived(rt.Labels) {
		return
	}
	old := rt.Labels[api.JobLabel]
	rt.Name = tj.Name
	rt.Labels[api.JobLabel] = tj.Name
	if d, ok := rt.Annotations[api.DescriptionAnnotation]; ok && old != tj.Name {
		rt.Annotations[api.DescriptionAnnotation] = strings.Replace(d, "MPI job "+old+":", "MPI job "+tj.Name+":", 1)
	}
	tj.Spec.RuntimeRef.Name = rt.Name
	eachJobEnv(&rt.Spec, tj.Name, func(_ *field.Path, e *corev1.EnvVar, want string) { e.Value = want })
}

// eachJobEnv calls fn with every MPIJOB_JOB_NAME, MPIJOB_OUTPUT_URI and
// MPIJOB_CHECKPOINT_URI
// (with a value, not a reference) of spec's node containers, its path and
// the value the builder gives job there.
func eachJobEnv(spec *trainer.TrainingRuntimeSpec, job string, fn func(path *field.Path, e *corev1.EnvVar, want string)) {
	want := jobEnvValues(job, spec)
	rjs := field.NewPath("spec", "template", "spec", "replicatedJobs")
	for i := range spec.Template.Spec.ReplicatedJobs {
		pod := &spec.Template.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec
		for c := range pod.Containers {
			if pod.Containers[c].Name != api.NodeContainer {
				continue
			}
			for k := range pod.Containers[c].Env {
				e := &pod.Containers[c].Env[k]
				if w, ours := want[e.Name]; ours && e.ValueFrom == nil {
					fn(rjs.Index(i).Child("template", "spec", "template", "spec", "containers").Index(c).Child("env").Index(k), e, w)
				}
			}
		}
	}
}

// jobEnvValues are the values of MPIJOB_JOB_NAME and MPIJOB_OUTPUT_URI that
// the builder gives job on a runtime with spec's storage.
func jobEnvValues(job string, spec *trainer.TrainingRuntimeSpec) map[string]string {
	conns, pvcs := StorageOf(spec)
	want := map[string]string{}
	for _, e := range dataconn.Env(job, conns, pvcs) {
		if e.Name == dataconn.JobNameEnv || e.Name == dataconn.OutputEnv || e.Name == dataconn.CheckpointEnv {
			want[e.Name] = e.Value
		}
	}
	return want
}
