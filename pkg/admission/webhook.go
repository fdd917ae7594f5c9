package admission

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	admissionv1 "k8s.io/api/admission/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/dataconn"
	"github.com/mpijob/mpijob/pkg/jobspec"
	"github.com/mpijob/mpijob/pkg/jobview"
	"github.com/mpijob/mpijob/pkg/placement"
	"github.com/mpijob/mpijob/pkg/queue"
	"github.com/mpijob/mpijob/pkg/runtimes"
	"github.com/mpijob/mpijob/pkg/suggest"
)

// Webhook paths the manager serves.
const (
	MutatePath   = "/mutate-trainer-kubeflow-org-v1alpha1-trainjob"
	ValidatePath = "/validate-trainer-kubeflow-org-v1alpha1-trainjob"
)

// Defaulter stamps the creator of a new MPI TrainJob: the requesting user.
// A job's YAML exported and created again (by its creator or a colleague)
// carries the creator and the manager's annotations of the job it came
// from; the user did not write them, so they are replaced, not refused:
// the creator becomes the requesting user, and the manager's annotations
// are dropped (the manager writes the new job's own). Changes afterwards
// are the Validator's to refuse.
//
// It also refuses a TrainJob whose MPI runtime does not exist, with a
// suggestion: mutating webhooks run before validating ones, so this answer
// comes before Trainer's own "not found". A bad progress-timeout
// annotation is refused too. A TrainJob of another framework is left as
// it is (the webhook configuration sends none here: ScopeCondition).
type Defaulter struct {
	Runtimes runtimes.RuntimeLookup
	// Copier gives a job created from another job's exported YAML a copy
	// of that job's per-job runtime (nil: none is made).
	Copier *RuntimeCopier
}

var _ admission.Defaulter[*trainer.TrainJob] = (*Defaulter)(nil)

// Default implements admission.Defaulter.
func (d *Defaulter) Default(ctx context.Context, tj *trainer.TrainJob) error {
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	if req.Operation != admissionv1.Create {
		return nil
	}
	if d.Copier != nil {
		if err := d.Copier.Copy(ctx, req, tj); err != nil {
			return err
		}
	}
	if d.Runtimes.Client != nil {
		rt, err := d.Runtimes.Find(ctx, withNamespace(ctx, tj))
		switch {
		case err != nil:
			// The validating webhook reads the runtime again and says why.
		case rt == nil:
			if err := denyUnknownRuntime(ctx, d.Runtimes, tj); err != nil {
				return err
			}
			return nil
		case !runtimes.IsMPI(rt.Spec):
			return nil
		}
	}
	if errs := jobPolicyErrors(tj.Annotations); len(errs) > 0 {
		return invalid(tj, errs)
	}
	if tj.Annotations == nil {
		tj.Annotations = map[string]string{}
	}
	for _, key := range managerAnnotations {
		delete(tj.Annotations, key)
	}
	tj.Annotations[api.CreatorAnnotation] = req.UserInfo.Username
	tj.Spec.RuntimePatches = DedupeKueuePatch(tj.Spec.RuntimePatches, time.Now())
	return nil
}

// KueueManager is the runtimePatches manager of Kueue's own patch.
const KueueManager = "kueue.x-k8s.io/manager"

// StalePatch is how old a Kueue runtime patch's time must be to be an
// earlier job's (DedupeKueuePatch). Trainer's defaulter stamps the time of
// a patch that has none during the same create, so a patch of this create
// is at most the admission chain's few seconds (and the nodes' clock skew)
// old when mpijob's webhook sees it.
const StalePatch = time.Minute

// DedupeKueuePatch leaves one runtime patch of Kueue's on a TrainJob being
// created. Kueue's webhook appends its patch to every TrainJob it sees
// created, so a job's exported YAML created again brings the earlier
// job's and gets a second, and the API server refuses the duplicate key
// of the list (runtimePatches is a map keyed by manager): the user wrote
// neither. Whatever order the API server calls the three
// mutating webhooks in (configurations run in the order of their names),
// mpijob's is called once (reinvocationPolicy: Never) and the result is
// one patch, this create's:
//   - a patch whose time is older than StalePatch is an earlier job's, and
//     goes (Trainer stamps the time of every patch when a job is created);
//     when mpijob's webhook runs before Kueue's, Kueue appends this
//     create's after it;
//   - of those left, the last stays: Kueue appends this create's (no time
//     yet, or the time Trainer's defaulter stamped just now when it ran
//     first).
//
// The one case left: mpijob's webhook before Kueue's and a job exported
// and created again within StalePatch of its original gets both, which
// the API server refuses; the same create a minute later is admitted.
func DedupeKueuePatch(patches []trainer.RuntimePatch, now time.Time) []trainer.RuntimePatch {
	stale := func(p trainer.RuntimePatch) bool {
		return p.Manager == KueueManager && p.Time != nil && p.Time.Time.Before(now.Add(-StalePatch))
	}
	last := -1
	for i, p := range patches {
		if p.Manager == KueueManager && !stale(p) {
			last = i
		}
	}
	out := patches[:0:0]
	for i, p := range patches {
		if p.Manager != KueueManager || i == last {
			out = append(out, p)
		}
	}
	if len(out) == len(patches) {
		return patches
	}
	return out
}

// Validator admits MPI TrainJobs: validation, runtime policy, quota
// pre-flight and warnings, on create and on every update that changes what
// will run. It caps the Workers of jobs on mpijob's runtimes, so no tenant
// can make Trainer's controller build a JobSet of billions of pods through
// them. Only the manager may write a job's Status. TrainJobs of other
// frameworks are not its to judge (ScopeCondition keeps them away).
type Validator struct {
	Runtimes runtimes.RuntimeLookup
	// Client reads ResourceQuotas: the manager's cache, so a create costs
	// no call to the API server (a live list of the namespace's quotas was
	// most of this webhook's p99 under a burst: bench/scale). The quota's
	// own admission in the API server stays the final word.
	Client client.Reader
	// MaxWorkers caps the Workers of a job whose runtime's policy sets no
	// max-workers (0: no cap).
	MaxWorkers int32
	// Manager is the user mpijob-manager acts as: the only one that may
	// write the status annotation.
	Manager string
	// Jobs reads TrainJobs (the manager's cache): the namespace's active
	// jobs for its cap. Nil skips that check.
	Jobs client.Reader
	// Pods reads the API server: the metadata of a JobSet's pods (from its
	// watch cache: one small read a create) and, only when there are such
	// pods, whether a TrainJob of the name exists; to refuse a new job while an
	// earlier one of the same name still has pods: the new Launcher would
	// reach the old Workers by their DNS names. Not the manager's cache:
	// every replica serves the webhooks, and a pod cache only for this
	// check made the replica that does not lead watch every pod of the
	// cluster (about a seventh of the manager's CPU at bench/scale, and
	// one more pod watcher for the API server to feed). Nil skips the
	// check.
	Pods client.Reader
	// PodCache, when CachedPods says so, answers the same check from the
	// manager's cache of pods instead: the leader keeps that cache for
	// its controllers anyway, and a read of it costs a create nothing,
	// where the API server's answer waits behind the other creates of a
	// burst (about 30 ms at p50 at bench/scale). Nil: always Pods.
	PodCache client.Reader
	// CachedPods says whether PodCache has every pod now: this replica
	// leads and its pod cache has synced.
	CachedPods func() bool
	// Priorities reads Kueue's WorkloadPriorityClasses (the API server: a
	// read only for jobs that name one), so a job names one that exists.
	// Nil skips the check.
	Priorities client.Reader
	// Placement, on a server dry run of a create, says whether the cluster
	// can place the job now (free capacity, free GPUs, its Kueue queue),
	// as warnings. Nil says nothing.
	Placement Placer
	// Namespaces reads a job's Namespace for its cap on active MPI jobs
	// (api.MaxActiveJobsAnnotation): the manager's cache, so a create
	// costs no read of the API server (it was one per create of an MPI
	// job, under a burst too). Nil skips the check.
	Namespaces client.Reader
	// ServiceAccounts checks, on a create, that the user may use each
	// ServiceAccount a job's own runtime names (a token in the ranks):
	// nil refuses every such job.
	ServiceAccounts *ServiceAccountCheck
	// Reviews creates SubjectAccessReviews: whether the user may list the
	// cluster's nodes, for placement's answer. Nil: redacted for everyone.
	Reviews client.Client
	// Registration checks a job's request to register its model when it
	// succeeds (api.RegisterModelAnnotation): nil refuses every such job.
	Registration *RegistrationCheck
}

// Placer judges whether the cluster can place a job now
// (placement.Reader).
type Placer interface {
	// Judge's answer is redacted for a user who may not list nodes.
	Judge(ctx context.Context, tj *trainer.TrainJob, shape runtimes.Shape, redacted bool) (placement.Answer, error)
}

var _ admission.Validator[*trainer.TrainJob] = (*Validator)(nil)

// ValidateUpdate keeps the creator and the manager's Status, and admits
// again every update that changes what will run: a new spec, or a job
// being resumed. Suspending (Kueue evicting a job) is never refused: a
// suspended job runs nothing, and it is judged again when it resumes.
func (v *Validator) ValidateUpdate(ctx context.Context, old, tj *trainer.TrainJob) (admission.Warnings, error) {
	// Read once: admit judges the same runtime. An error matters only
	// when the update is judged (below), as it did before.
	rt, findErr := v.Runtimes.Find(ctx, withNamespace(ctx, tj))
	if findErr == nil && rt != nil && !runtimes.IsMPI(rt.Spec) {
		return nil, nil // another framework's: upstream's to admit
	}
	var errs field.ErrorList
	if prev, ok := old.Annotations[api.CreatorAnnotation]; ok {
		if cur, ok := tj.Annotations[api.CreatorAnnotation]; !ok || cur != prev {
			errs = append(errs, field.Forbidden(annotationPath(api.CreatorAnnotation),
				fmt.Sprintf("the creator of a job cannot change or be removed (it is %q)", prev)))
		}
	}
	for _, key := range managerAnnotations {
		was, had := old.Annotations[key]
		is, has := tj.Annotations[key]
		if (had != has || was != is) && !v.isManager(ctx) {
			errs = append(errs, managerOnly(key))
		}
	}
	errs = append(errs, jobPolicyErrors(tj.Annotations)...)
	if rt != nil {
		rerrs, err := v.Registration.Check(ctx, old, tj)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		errs = append(errs, rerrs...)
	}
	if old.Labels[queue.PriorityLabel] != tj.Labels[queue.PriorityLabel] && rt != nil {
		perrs, err := v.priorityErrors(ctx, tj)
		if err != nil {
			return nil, err
		}
		errs = append(errs, perrs...)
	}
	if len(errs) > 0 {
		return nil, invalid(tj, errs)
	}
	if tj.DeletionTimestamp != nil || !ChangesWhatRuns(old, tj) {
		return nil, nil
	}
	if findErr != nil {
		return nil, runtimeReadError(tj, findErr)
	}
	return v.admit(ctx, tj, rt, false)
}

// ChangesWhatRuns reports whether an update of a TrainJob can change the
// pods it runs, now or when it resumes: a job being resumed, or a new
// spec. Suspending is not: a suspended job runs nothing.
func ChangesWhatRuns(old, tj *trainer.TrainJob) bool {
	was, is := ptr.Deref(old.Spec.Suspend, false), ptr.Deref(tj.Spec.Suspend, false)
	switch {
	case is && !was:
		return false
	case was && !is:
		return true
	}
	return !equality.Semantic.DeepEqual(old.Spec, tj.Spec)
}

// ValidateDelete lets every deletion through.
func (v *Validator) ValidateDelete(context.Context, *trainer.TrainJob) (admission.Warnings, error) {
	return nil, nil
}

// ValidateCreate admits a new job: see admit. A new job carries no Status
// but the manager's.
func (v *Validator) ValidateCreate(ctx context.Context, tj *trainer.TrainJob) (admission.Warnings, error) {
	rt, err := v.Runtimes.Find(ctx, withNamespace(ctx, tj))
	if err != nil {
		return nil, runtimeReadError(tj, err)
	}
	if rt != nil && !runtimes.IsMPI(rt.Spec) {
		return nil, nil // another framework's: upstream's to admit
	}
	if !v.isManager(ctx) {
		// The mutating webhook (failurePolicy Ignore) dropped these and
		// stamped the creator; when it did not answer, nothing of the
		// job's bookkeeping may come from the request.
		for _, key := range managerAnnotations {
			if _, ok := tj.Annotations[key]; ok {
				return nil, invalid(tj, field.ErrorList{managerOnly(key)})
			}
		}
		if req, err := admission.RequestFromContext(ctx); err == nil && rt != nil && tj.Annotations[api.CreatorAnnotation] != req.UserInfo.Username {
			return nil, invalid(tj, field.ErrorList{field.Forbidden(annotationPath(api.CreatorAnnotation), fmt.Sprintf(
				"mpijob-manager records who creates an MPI job, and it did not answer in time to record %q: try again (if it keeps failing, ask an administrator to check mpijob-manager: kubectl -n mpijob-system get pods)", req.UserInfo.Username))})
		}
	}
	if rt != nil && ownedByMPIJob(tj, rt) {
		if err := v.earlierPods(ctx, tj); err != nil {
			return nil, err
		}
	}
	if rt != nil {
		errs, err := v.priorityErrors(ctx, tj)
		if err != nil {
			return nil, err
		}
		rerrs, err := v.Registration.Check(ctx, nil, tj)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		if errs = append(errs, rerrs...); len(errs) > 0 {
			return nil, invalid(tj, errs)
		}
	}
	return v.admit(ctx, tj, rt, true)
}

// runtimeReadError is the answer when tj's runtime could not be read.
func runtimeReadError(tj *trainer.TrainJob, err error) error {
	return apierrors.NewInternalError(fmt.Errorf("failed to read runtime %s: %w", tj.Spec.RuntimeRef.Name, err))
}

// withNamespace is tj with the request's namespace when it has none.
func withNamespace(ctx context.Context, tj *trainer.TrainJob) *trainer.TrainJob {
	tj.Namespace = namespaceOf(ctx, tj.Namespace)
	return tj
}

// ownedByMPIJob reports whether tj follows mpijob's conventions: it was
// made by mpijob's job builder (CLI, SDK, dashboard), runs on one of
// mpijob's own runtimes, or runs on an MPI runtime of its namespace. Such
// a job gets the cluster's Worker cap, the quota pre-flight and the
// earlier-pods check; a job on another MPI
// runtime (upstream's deepspeed-distributed, say) gets only the refusals
// of a job that could never run as its user meant (docs/admin.md).
func ownedByMPIJob(tj *trainer.TrainJob, rt *runtimes.Runtime) bool {
	if _, ok := tj.Labels[api.BaseRuntimeLabel]; ok {
		return true
	}
	if ptr.Deref(tj.Spec.RuntimeRef.Kind, "") == trainer.TrainingRuntimeKind {
		// A namespaced MPI runtime (a per-job one, or a tenant's own) is
		// governed as mpijob's: a tenant may create TrainingRuntimes, so
		// the cluster's guards must hold on them.
		return true
	}
	return rt.Labels[api.RuntimeLabel] == "true" || jobspec.IsDerived(rt.Labels)
}

// earlierPods refuses a job whose name an earlier job's pods still carry
// (they terminate after the job is deleted): JobSet names pods and their
// DNS names after the job, so the new Launcher could reach the old
// Workers.
func (v *Validator) earlierPods(ctx context.Context, tj *trainer.TrainJob) error {
	if v.Pods == nil || tj.Name == "" {
		return nil
	}
	ns := namespaceOf(ctx, tj.Namespace)
	names, err := v.earlierPodNames(ctx, ns, tj.Name)
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("failed to look for pods of an earlier job %s: %w", tj.Name, err))
	}
	if len(names) == 0 {
		return nil
	}
	// Those pods may be a job's that still exists: the API server then
	// refuses the create as AlreadyExists, the clearer word. Asked of the
	// API server, not a cache: a cache can still hold a job deleted a
	// moment ago, and the new job would then be let through beside the
	// old one's pods (seen in CI: a create retried while the old job was
	// deleted got through).
	existing := &metav1.PartialObjectMetadata{}
	existing.SetGroupVersionKind(trainer.GroupVersion.WithKind(trainer.TrainJobKind))
	if err := v.Pods.Get(ctx, client.ObjectKey{Namespace: ns, Name: tj.Name}, existing); err == nil && existing.DeletionTimestamp == nil {
		return nil
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusConflict, Reason: metav1.StatusReasonConflict,
		Message: fmt.Sprintf("an earlier job named %s still has %d pod(s) in namespace %s (%s, ...), which a new job of that name would reach by their DNS names: "+
			"wait until they are gone (kubectl get pods -n %s -l %s=%s) and try again, or pick another name",
			tj.Name, len(names), ns, names[0], ns, jobsetv1alpha2.JobSetNameKey, tj.Name),
		Details: &metav1.StatusDetails{Group: trainer.GroupVersion.Group, Kind: "trainjobs", Name: tj.Name},
	}}
}

// earlierPodNames names the pods of JobSet name in namespace ns: from the
// pod cache where CachedPods says it has every pod (the leader), else from
// the API server (EarlierPods).
func (v *Validator) earlierPodNames(ctx context.Context, ns, name string) ([]string, error) {
	var list client.ObjectList
	var err error
	if v.PodCache != nil && v.CachedPods != nil && v.CachedPods() {
		list, err = runtimes.ListJobSetPods(ctx, v.PodCache, ns, name, client.UnsafeDisableDeepCopy)
	} else {
		list, err = EarlierPods(ctx, v.Pods, ns, name)
	}
	if err != nil {
		return nil, err
	}
	var names []string
	err = meta.EachListItem(list, func(o runtime.Object) error {
		names = append(names, o.(metav1.Object).GetName())
		return nil
	})
	return names, err
}

// EarlierPods lists the metadata of the pods that carry JobSet name's
// label in namespace ns, as the API server's watch cache has them
// (resourceVersion 0: no quorum read; the pods of a job deleted a moment
// ago are there as they were in the manager's cache before).
func EarlierPods(ctx context.Context, r client.Reader, ns, name string) (*metav1.PartialObjectMetadataList, error) {
	pods := &metav1.PartialObjectMetadataList{}
	pods.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
	err := r.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: name},
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: "0"}})
	return pods, err
}

// managerAnnotations are the annotations only mpijob-manager writes: what
// every viewer of a job reads as the manager's word.
// priorityErrors refuses a Kueue priority class that the cluster does not
// have: Kueue would not make the job's Workload, and the job would wait
// for ever with no word of why.
func (v *Validator) priorityErrors(ctx context.Context, tj *trainer.TrainJob) (field.ErrorList, error) {
	name, ok := tj.Labels[queue.PriorityLabel]
	if !ok || v.Priorities == nil {
		return nil, nil
	}
	path := field.NewPath("metadata", "labels").Key(queue.PriorityLabel)
	classes, err := queue.PriorityClasses(ctx, v.Priorities)
	switch {
	case errors.Is(err, queue.ErrNoKueue):
		return field.ErrorList{field.Invalid(path, name, "this cluster runs no Kueue, which gives jobs their priority: leave the priority out")}, nil
	case err != nil:
		return nil, apierrors.NewInternalError(fmt.Errorf("failed to read Kueue's WorkloadPriorityClasses: %w", err))
	}
	if problem := queue.PriorityProblem(name, classes); problem != "" {
		return field.ErrorList{field.Invalid(path, name, problem)}, nil
	}
	return nil, nil
}

var managerAnnotations = []string{api.StatusAnnotation, api.RankFailureAnnotation, api.ResumedAnnotation, api.EndedByAnnotation, api.StacksAnnotation, api.ModelRegistrationAnnotation}

// jobPolicyErrors checks the policy annotations a job may set for itself
// (its progress timeout, how long it is left when it can never finish).
func jobPolicyErrors(annotations map[string]string) field.ErrorList {
	var errs field.ErrorList
	if _, ferr := runtimes.ParseProgressTimeout(annotations); ferr != nil {
		errs = append(errs, ferr)
	}
	if _, ferr := runtimes.ParseEndStuckAfter(annotations); ferr != nil {
		errs = append(errs, ferr)
	}
	if _, _, ferr := runtimes.ParseSlowRankAfter(annotations); ferr != nil {
		errs = append(errs, ferr)
	}
	return errs
}

func managerOnly(key string) *field.Error {
	what := "a job's status (its diagnosis, shown by kubectl mpijob, the SDK and the dashboard)"
	switch key {
	case api.RankFailureAnnotation:
		what = "which rank of a job failed (read from its Launcher's log; the diagnosis names it)"
	case api.ResumedAnnotation:
		what = "where a job's program resumed from a checkpoint (read from its Launcher's log)"
	case api.EndedByAnnotation:
		what = "why it ended a job that could never finish"
	case api.StacksAnnotation:
		what = "where a stuck job's ranks were when the diagnosis looked"
	case api.ModelRegistrationAnnotation:
		what = "what came of registering a job's model (--register-model)"
	}
	return field.Forbidden(annotationPath(key), "only mpijob-manager writes "+what+": leave this annotation out, or as it is")
}

func annotationPath(key string) *field.Path {
	return field.NewPath("metadata", "annotations").Key(key)
}

// namespaceOf is ns, or the request's namespace when the object left it
// empty (a create with the namespace only in the URL).
func namespaceOf(ctx context.Context, ns string) string {
	if ns == "" {
		if req, err := admission.RequestFromContext(ctx); err == nil {
			return req.Namespace
		}
	}
	return ns
}

// isManager reports whether the request comes from mpijob-manager itself.
func (v *Validator) isManager(ctx context.Context) bool {
	req, err := admission.RequestFromContext(ctx)
	return err == nil && v.Manager != "" && req.UserInfo.Username == v.Manager
}

// admit judges a job as it will run on rt, its runtime as the caller read
// it (nil: none of that name): the runtime (and, for a per-job runtime,
// the cluster runtime it derives from), the Worker cap, the runtime's
// policy, the fields Trainer would not apply to the Workers and, for a new
// job of mpijob's, the namespace's quota. Jobs of other frameworks pass.
func (v *Validator) admit(ctx context.Context, tj *trainer.TrainJob, rt *runtimes.Runtime, create bool) (admission.Warnings, error) {
	if rt == nil {
		// Not ours to judge unless it looks like an MPI runtime: Trainer
		// answers for the others.
		return nil, denyUnknownRuntime(ctx, v.Runtimes, tj)
	}
	if !runtimes.IsMPI(rt.Spec) {
		// Another framework's job: admitted as upstream admits it (the
		// webhook configuration sends none here; one sent before the
		// configuration caught up is let through all the same).
		return nil, nil
	}
	spec, annotations := rt.Spec, rt.Annotations
	ours := ownedByMPIJob(tj, rt)
	job := Job{TrainJob: tj, RuntimeFound: true}
	if ours {
		job.ClusterMaxWorkers = v.MaxWorkers
	}
	if ptr.Deref(tj.Spec.RuntimeRef.Kind, "") == trainer.TrainingRuntimeKind {
		if jobspec.IsDerived(rt.Labels) {
			// mpijob's per-job copy of a cluster runtime, held to that
			// runtime's policy.
			base, errs, err := v.perJobBase(ctx, tj, spec)
			if err != nil {
				return nil, apierrors.NewInternalError(err)
			}
			if len(errs) > 0 {
				return nil, invalid(tj, errs)
			}
			job.BaseRuntime, annotations = base.Name, base.Annotations
			job.NamespaceRuntime = runtimes.IsNamespaced(base)
		} else {
			// A runtime of the namespace's own: its policy annotations
			// (which only its own jobs follow) and the cluster's guards,
			// which no runtime of a tenant's can loosen: the Worker cap,
			// where claims may be mounted, the grace period, the
			// ServiceAccount, the quota pre-flight.
			job.NamespaceRuntime = true
			if errs := NamespacedRuntimeErrors(spec); len(errs) > 0 {
				return nil, invalid(tj, errs)
			}
		}
	}
	if create {
		// No token where none is needed: a ServiceAccount that the job's
		// own runtime (mpijob's per-job one, or the namespace's) or its
		// runtime patches name, or whose token they mount, needs the
		// user's right to create its tokens. A cluster runtime's own are
		// its administrator's.
		var own []string
		if ptr.Deref(tj.Spec.RuntimeRef.Kind, "") == trainer.TrainingRuntimeKind {
			own = jobspec.TokenAccountsOf(spec)
		}
		patched := slices.DeleteFunc(jobspec.PatchAccountsOf(tj, spec), func(sa string) bool { return slices.Contains(own, sa) })
		var errs field.ErrorList
		for _, c := range []struct {
			sas         []string
			fromPatches bool
		}{{own, false}, {patched, true}} {
			e, err := v.ServiceAccounts.CheckAccounts(ctx, tj, c.sas, c.fromPatches)
			if err != nil {
				return nil, apierrors.NewInternalError(err)
			}
			errs = append(errs, e...)
		}
		if len(errs) > 0 {
			return nil, invalid(tj, errs)
		}
	}
	policy, perrs := runtimes.ParsePolicy(annotations)
	if len(perrs) > 0 {
		return nil, denied(fmt.Sprintf("runtime %s has an invalid policy, ask its administrator to fix it: %s", job.runtimeName(), perrs.ToAggregate().Error()))
	}
	shape, err := runtimes.ShapeOf(tj, spec)
	if err != nil {
		return nil, denied(err.Error())
	}
	job.Workers, job.WorkerPod, job.LauncherPod = shape.Workers, &shape.WorkerPod, &shape.LauncherPod
	job.LauncherAsNode = shape.LauncherAsNode
	if errs := memoryErrors(tj, shape); len(errs) > 0 {
		return nil, invalid(tj, errs)
	}
	if errs := append(ValidateTrainJob(job, policy), ValidateWorkerFields(job)...); len(errs) > 0 {
		return nil, invalid(tj, errs)
	}
	if create {
		if err := v.activeJobCap(ctx, tj); err != nil {
			return nil, err
		}
	}
	if !create || !ours {
		// Quota was checked when the job was created, and an admitted
		// job's pods already count against it. A job on another MPI
		// runtime meets the quota where upstream's do: when its pods are
		// created.
		return v.placement(ctx, tj, shape, create, Warnings(job)), nil
	}
	quotas := &corev1.ResourceQuotaList{}
	if err := v.Client.List(ctx, quotas, client.InNamespace(tj.Namespace)); err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("failed to read ResourceQuotas of %s: %w", tj.Namespace, err))
	}
	check := CheckQuota
	if tj.Labels[queue.NameLabel] != "" {
		// Kueue's own webhook has set the namespace's default LocalQueue
		// by now (mutating webhooks run first).
		check = CheckQuotaQueued
	}
	if violations := check(DemandOf(shape), quotas.Items); len(violations) > 0 {
		return nil, quotaDenial(tj, violations)
	}
	return v.placement(ctx, tj, shape, create, Warnings(job)), nil
}

// placement adds to warnings, on a server dry run of a create, whether the
// cluster can place the job now. It never refuses: what is free changes
// by the minute, and a job that waits is not wrong.
func (v *Validator) placement(ctx context.Context, tj *trainer.TrainJob, shape runtimes.Shape, create bool, warnings []string) []string {
	if v.Placement == nil || !create {
		return warnings
	}
	req, err := admission.RequestFromContext(ctx)
	if err != nil || !ptr.Deref(req.DryRun, false) {
		return warnings
	}
	// A tenant, who may not list the nodes, learns whether the job fits,
	// not what the cluster's nodes have free.
	redacted := true
	if v.Reviews != nil {
		may, err := userMay(ctx, v.Reviews, req.UserInfo, authorizationv1.ResourceAttributes{Verb: "list", Resource: "nodes"})
		if err != nil {
			return append(warnings, placement.Prefix+"could not be worked out now: "+err.Error())
		}
		redacted = !may
	}
	ans, err := v.Placement.Judge(ctx, tj, shape, redacted)
	if err != nil {
		return append(warnings, placement.Prefix+"could not be worked out now: "+err.Error())
	}
	return append(warnings, ans.Lines...)
}

// perJobBase checks the namespaced runtime of tj: it must be mpijob's
// per-job runtime of this job, derived from an MPI ClusterTrainingRuntime (or
// an MPI TrainingRuntime of the namespace's own)
// with nothing changed but the node containers' images and resources.
// It returns that base runtime, whose policy then applies.
func (v *Validator) perJobBase(ctx context.Context, tj *trainer.TrainJob, spec *trainer.TrainingRuntimeSpec) (*trainer.ClusterTrainingRuntime, field.ErrorList, error) {
	path := field.NewPath("spec", "runtimeRef", "name")
	rt := &trainer.TrainingRuntime{}
	key := client.ObjectKey{Namespace: tj.Namespace, Name: tj.Spec.RuntimeRef.Name}
	err := v.Runtimes.Client.Get(ctx, key, rt)
	if apierrors.IsNotFound(err) && v.Runtimes.Live != nil {
		// Made a moment ago (a client's, or the mutating webhook's copy):
		// not in the cache yet.
		err = v.Runtimes.Live.Get(ctx, key, rt)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("failed to read TrainingRuntime %s: %w", tj.Spec.RuntimeRef.Name, err)
	}
	name := rt.Name
	if !jobspec.IsDerived(rt.Labels) {
		return nil, field.ErrorList{field.Forbidden(path, fmt.Sprintf(
			"TrainingRuntime %s is not a runtime mpijob made for one job (labels %s and %s), so no cluster policy covers it: "+
				"use an MPI ClusterTrainingRuntime (kubectl mpijob runtimes list), or ask an administrator to publish this one as a ClusterTrainingRuntime",
			name, api.JobLabel, api.BaseRuntimeLabel))}, nil
	}
	if rt.Labels[api.JobLabel] != tj.Name && !copiedOnCreate(ctx) {
		return nil, field.ErrorList{field.Forbidden(path, fmt.Sprintf(
			"TrainingRuntime %s belongs to job %s, not %s: each job has a runtime of its own (kubectl mpijob create -f, clone, or kubectl create -f as a user who may create TrainingRuntimes makes it)", name, rt.Labels[api.JobLabel], tj.Name))}, nil
	}
	baseName := rt.Labels[api.BaseRuntimeLabel]
	baseKind := trainer.ClusterTrainingRuntimeKind
	base := &trainer.ClusterTrainingRuntime{}
	var berr error
	if rt.Labels[api.BaseRuntimeKindLabel] == trainer.TrainingRuntimeKind {
		// Derived from a runtime of the namespace's own.
		baseKind = trainer.TrainingRuntimeKind
		own := &trainer.TrainingRuntime{}
		if berr = v.Runtimes.Client.Get(ctx, client.ObjectKey{Namespace: tj.Namespace, Name: baseName}, own); berr == nil {
			if jobspec.IsDerived(own.Labels) {
				return nil, field.ErrorList{field.Forbidden(path, fmt.Sprintf("runtime %s of this job names TrainingRuntime %s as its base, which is another job's own runtime: create the job on a runtime of kubectl mpijob runtimes list", name, baseName))}, nil
			}
			base = runtimes.AsBase(own)
		}
	} else {
		berr = v.Runtimes.Client.Get(ctx, client.ObjectKey{Name: baseName}, base)
	}
	if berr != nil {
		if apierrors.IsNotFound(berr) {
			return nil, field.ErrorList{field.NotFound(path, fmt.Sprintf("runtime %s of this job was derived from %s %s, which does not exist (any more)", name, baseKind, baseName))}, nil
		}
		return nil, nil, fmt.Errorf("failed to read %s %s: %w", baseKind, baseName, berr)
	}
	if errs := pvcMountErrors(spec); len(errs) > 0 {
		return nil, errs, nil
	}
	if errs := jobspec.JobEnvErrors(rt); len(errs) > 0 {
		return nil, errs, nil
	}
	if errs := jobspec.GracePeriodErrors(rt); len(errs) > 0 {
		return nil, errs, nil
	}
	if !runtimes.IsMPI(&base.Spec) || !jobspec.SameSpec(jobspec.Normalize(spec, &base.Spec), &base.Spec) {
		return nil, field.ErrorList{field.Forbidden(path, fmt.Sprintf(
			"TrainingRuntime %s differs from %s in more than a job may change (the images, resources, storage, retries and grace period of the Launcher and the Workers): recreate the job with kubectl mpijob create (or the SDK), which derives it", name, baseName))}, nil
	}
	return base, nil, nil
}

// NamespacedRuntimeErrors are the cluster's guards on an MPI runtime of a
// namespace's own (a tenant's TrainingRuntime, not mpijob's per-job
// copy), which its jobs and the runtime itself are checked against: where
// it mounts claims, and how long its pods may take to stop.
func NamespacedRuntimeErrors(spec *trainer.TrainingRuntimeSpec) field.ErrorList {
	errs := pvcMountErrors(spec)
	return append(errs, jobspec.GracePeriodErrors(&trainer.TrainingRuntime{Spec: *spec})...)
}

// copiedOnCreate reports whether the request is a server dry run of a
// create: the mutating webhook makes a job created from another job's
// YAML a copy of that job's runtime, except on a dry run, so the runtime
// judged then is the one the copy would be made from.
func copiedOnCreate(ctx context.Context) bool {
	req, err := admission.RequestFromContext(ctx)
	return err == nil && req.Operation == admissionv1.Create && ptr.Deref(req.DryRun, false)
}

// memoryErrors refuses pods that could never start for want of memory: a
// bare number is bytes, and the kubelet sizes a pod's in-memory volumes
// (the SSH key Trainer mounts) by its memory limit, so "10" left the
// Workers in FailedMount for good. The TrainJob's own resources are named
// first; else the runtime's pods.
func memoryErrors(tj *trainer.TrainJob, shape runtimes.Shape) field.ErrorList {
	var errs field.ErrorList
	if tr := tj.Spec.Trainer; tr != nil && tr.ResourcesPerNode != nil {
		path := field.NewPath("spec", "trainer", "resourcesPerNode")
		for _, l := range []struct {
			name string
			rl   corev1.ResourceList
		}{{"limits", tr.ResourcesPerNode.Limits}, {"requests", tr.ResourcesPerNode.Requests}} {
			if q, ok := l.rl[corev1.ResourceMemory]; ok {
				if problem := jobspec.TooLittleMemory(q); problem != "" {
					errs = append(errs, field.Invalid(path.Child(l.name).Key("memory"), q.String(), problem))
				}
			}
		}
	}
	if len(errs) > 0 {
		return errs
	}
	for _, p := range []struct {
		who string
		pod *corev1.PodSpec
	}{{"Worker", &shape.WorkerPod}, {"Launcher", &shape.LauncherPod}} {
		for _, c := range p.pod.Containers {
			for _, rl := range []corev1.ResourceList{c.Resources.Limits, c.Resources.Requests} {
				q, ok := rl[corev1.ResourceMemory]
				if !ok {
					continue
				}
				if problem := jobspec.TooLittleMemory(q); problem != "" {
					return field.ErrorList{field.Invalid(field.NewPath("spec", "runtimeRef", "name"), tj.Spec.RuntimeRef.Name,
						fmt.Sprintf("the runtime gives the %s's container %s a memory of %s, %s", p.who, c.Name, q.String(), strings.TrimPrefix(problem, "is ")))}
				}
			}
		}
	}
	return nil
}

// DemandOf turns a Shape into what it asks of quota.
func DemandOf(s runtimes.Shape) Demand {
	d := Demand{Launchers: int64(s.Launchers), Workers: int64(s.Workers)}
	d.WorkerRequests, d.WorkerLimits = runtimes.PodDemand(&s.WorkerPod)
	d.LauncherRequests, d.LauncherLimits = runtimes.PodDemand(&s.LauncherPod)
	return d
}

// looksMPI guesses whether an unknown runtime name was meant to be an MPI
// runtime, so typos get a suggestion without judging other frameworks.
func looksMPI(name string, known []string) bool {
	return strings.HasPrefix(name, "mpi") || suggest.Closest(name, known) != ""
}

// quotaDenial refuses a job over quota: the sentence people read, and each
// resource's numbers as a structured cause (api.QuotaCause) for programs.
func quotaDenial(tj *trainer.TrainJob, violations []QuotaViolation) *apierrors.StatusError {
	msgs := make([]string, 0, len(violations))
	causes := make([]metav1.StatusCause, 0, len(violations))
	for _, q := range violations {
		msgs = append(msgs, q.Message())
		causes = append(causes, api.QuotaCause{
			Resource: displayName(q.Key), Requested: q.Requested.String(), Quota: q.Hard.String(), InUse: q.Used.String(),
			ResourceQuota: q.Quota, MaxWorkers: q.MaxWorkers,
		}.Cause(q.Key))
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden,
		Message: fmt.Sprintf("MPI job %s does not fit the quota of namespace %s: %s", tj.Name, tj.Namespace, strings.Join(msgs, "; ")),
		Details: &metav1.StatusDetails{Group: trainer.GroupVersion.Group, Kind: "trainjobs", Name: tj.Name, Causes: causes},
	}}
}

// invalid is a denial with the fields at fault (Reason Invalid, 422).
func invalid(tj *trainer.TrainJob, errs field.ErrorList) *apierrors.StatusError {
	return apierrors.NewInvalid(schema.GroupKind{Group: trainer.GroupVersion.Group, Kind: trainer.TrainJobKind}, tj.Name, errs)
}

// denied is a denial that concerns no field of the job (a runtime's
// broken policy).
func denied(msg string) *apierrors.StatusError {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: msg,
	}}
}

// denyUnknownRuntime refuses a TrainJob whose runtime is known not to
// exist when its name looks like an MPI runtime (nil otherwise).
func denyUnknownRuntime(ctx context.Context, l runtimes.RuntimeLookup, tj *trainer.TrainJob) error {
	known := l.MPIRuntimeNames(ctx)
	if !looksMPI(tj.Spec.RuntimeRef.Name, known) {
		return nil
	}
	if errs := ValidateTrainJob(Job{TrainJob: tj, KnownRuntimes: known}, runtimes.Policy{}); len(errs) > 0 {
		return invalid(tj, errs)
	}
	return nil
}

// pvcMountErrors checks where a per-job runtime mounts its PVCs, as the
// CLI, the SDK and the wizard check them (dataconn.ValidatePVC): a claim
// mounted over /usr or /bin would put the job's own files where the
// runtime's, and an artifacts reader's, programs are.
func pvcMountErrors(spec *trainer.TrainingRuntimeSpec) field.ErrorList {
	var errs field.ErrorList
	for _, rj := range spec.Template.Spec.ReplicatedJobs {
		pod := rj.Template.Spec.Template.Spec
		claims, configMaps := map[string]string{}, map[string]string{}
		for _, v := range pod.Volumes {
			if v.PersistentVolumeClaim != nil {
				claims[v.Name] = v.PersistentVolumeClaim.ClaimName
			}
			// The ConfigMaps the builder mounts (a base runtime's own
			// volumes are its administrator's).
			if v.ConfigMap != nil && v.Name == dataconn.ConfigMapVolumeName(v.ConfigMap.Name) {
				configMaps[v.Name] = v.ConfigMap.Name
			}
		}
		for i, ct := range append(slices.Clone(pod.InitContainers), pod.Containers...) {
			for k, m := range ct.VolumeMounts {
				what, why := "", ""
				if claim, ok := claims[m.Name]; ok {
					what, why = "PVC "+claim, dataconn.ValidatePVC(dataconn.PVC{Claim: claim, MountPath: m.MountPath})
				} else if cm, ok := configMaps[m.Name]; ok {
					what, why = "ConfigMap "+cm, dataconn.ValidateConfigMap(dataconn.ConfigMap{Name: cm, MountPath: m.MountPath})
				}
				if why != "" {
					errs = append(errs, field.Invalid(field.NewPath("spec", "runtimeRef", "name"), m.MountPath, fmt.Sprintf(
						"this job's runtime mounts %s in %s of replicated job %s (container %d, mount %d): %s", what, ct.Name, rj.Name, i, k, why)))
				}
			}
		}
	}
	return errs
}

// activeJobCap refuses a new MPI job in a namespace that already has as
// many active (unfinished) MPI jobs as its administrator allows
// (annotation mpijob.dev/max-active-jobs on the Namespace, which tenants
// cannot edit).
func (v *Validator) activeJobCap(ctx context.Context, tj *trainer.TrainJob) error {
	if v.Namespaces == nil || v.Jobs == nil {
		return nil
	}
	ns := &corev1.Namespace{}
	if err := v.Namespaces.Get(ctx, client.ObjectKey{Name: tj.Namespace}, ns); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return apierrors.NewInternalError(fmt.Errorf("failed to read namespace %s for its cap on MPI jobs: %w", tj.Namespace, err))
	}
	limit, ok := MaxActiveJobs(ns.Annotations)
	if !ok {
		return nil
	}
	jobs := &trainer.TrainJobList{}
	if err := v.Jobs.List(ctx, jobs, client.InNamespace(tj.Namespace)); err != nil {
		return apierrors.NewInternalError(fmt.Errorf("failed to list the MPI jobs of %s: %w", tj.Namespace, err))
	}
	active := ActiveMPIJobs(jobs.Items, tj.Name, func(j *trainer.TrainJob) bool {
		spec, _, found, err := v.Runtimes.Get(ctx, j)
		return err == nil && found && runtimes.IsMPI(spec)
	})
	if len(active) < limit {
		return nil
	}
	return invalid(tj, field.ErrorList{field.Forbidden(field.NewPath("metadata", "namespace"), ActiveJobsDenial(tj.Namespace, limit, active))})
}

// MaxActiveJobs reads a Namespace's cap on active MPI jobs (ok false: no
// cap, or a value that is not a whole number of at least 0).
func MaxActiveJobs(annotations map[string]string) (int, bool) {
	v, ok := annotations[api.MaxActiveJobsAnnotation]
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// ActiveMPIJobs names the jobs of jobs that are MPI jobs (isMPI) and have
// not finished, but self (a job of the same name being created again).
func ActiveMPIJobs(jobs []trainer.TrainJob, self string, isMPI func(*trainer.TrainJob) bool) []string {
	var out []string
	for i := range jobs {
		j := &jobs[i]
		if j.Name == self || j.DeletionTimestamp != nil || jobview.TrainerFinished(j) || !isMPI(j) {
			continue
		}
		out = append(out, j.Name)
	}
	sort.Strings(out)
	return out
}

// ActiveJobsDenial says the cap is reached, with the numbers and the jobs.
func ActiveJobsDenial(ns string, limit int, active []string) string {
	names := active
	more := ""
	if len(names) > 5 {
		names, more = names[:5], fmt.Sprintf(" and %d more", len(active)-5)
	}
	return fmt.Sprintf("namespace %s allows at most %d active MPI jobs (annotation %s on the namespace), and %d are active (%s%s): wait for one to finish, delete one (kubectl mpijob get; kubectl mpijob delete NAME), or ask an administrator to raise the cap",
		ns, limit, api.MaxActiveJobsAnnotation, len(active), strings.Join(names, ", "), more)
}
