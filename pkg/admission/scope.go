package admission

import (
	"fmt"
	"slices"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/api"
)

// ScopeCondition names the match condition that limits mpijob's TrainJob
// webhooks, and the policy that refuses MPI jobs while mpijob-manager is
// down, to MPI jobs. The API server evaluates it, so a TrainJob of another
// framework never reaches mpijob-manager: it is admitted exactly as
// upstream admits it, whether or not the manager runs.
//
// A match condition sees only the TrainJob, not its runtime, so the
// expression names the MPI ClusterTrainingRuntimes; mpijob-manager keeps
// the list current (pkg/admission/scopecontroller) and the release ships the runtimes
// known at build time (config/webhook).
const ScopeCondition = "an-mpi-job"

// ManagerRunningPolicy is the ValidatingAdmissionPolicy that refuses MPI
// jobs, with a sentence naming mpijob-manager, while no replica of it is
// ready (config/webhook).
const ManagerRunningPolicy = api.ManagerRunningPolicy

// ScopeExpression is the CEL expression of ScopeCondition for the MPI
// ClusterTrainingRuntimes named: a TrainJob is mpijob's when
//   - it was made by mpijob's job builder (label mpijob.dev/base-runtime),
//   - it references a TrainingRuntime of its namespace: mpijob's per-job
//     runtime, or a tenant's own runtime, which the webhooks read and judge
//     as an MPI runtime when it has an MPI policy (a match condition cannot
//     read the runtime, and a tenant's MPI runtime must not skip
//     admission); a job on a namespaced runtime of another framework is
//     let through unchanged;
//   - or it references one of those ClusterTrainingRuntimes, or a name
//     starting with "mpi-" (a typo of an MPI runtime gets a suggestion).
//
// The names are sorted so the expression changes only when the set does.
func ScopeExpression(mpiRuntimes []string) string {
	names := slices.Clone(mpiRuntimes)
	slices.Sort(names)
	names = slices.Compact(names)
	quoted := make([]string, 0, len(names))
	for _, n := range names {
		quoted = append(quoted, fmt.Sprintf("'%s'", strings.ReplaceAll(n, "'", "")))
	}
	// Every field is tested with has() first: mutating webhooks see the
	// object before the schema is checked, and an error in a condition
	// would refuse the request instead of leaving it to the schema.
	return fmt.Sprintf("has(object.spec) && has(object.spec.runtimeRef) && has(object.spec.runtimeRef.name) && ("+
		"(has(object.metadata) && has(object.metadata.labels) && '%s' in object.metadata.labels) || "+
		"(has(object.spec.runtimeRef.kind) && object.spec.runtimeRef.kind == '%s' && has(object.metadata)) || "+
		"object.spec.runtimeRef.name.startsWith('mpi-') || object.spec.runtimeRef.name in [%s])",
		api.BaseRuntimeLabel, trainer.TrainingRuntimeKind, strings.Join(quoted, ", "))
}

// SetScope sets the expression of every match condition named
// ScopeCondition in obj (a webhook configuration or a validating admission
// policy) and reports whether anything changed. Conditions of other names
// and objects of other kinds are left alone.
func SetScope(obj client.Object, expr string) bool {
	changed := false
	for _, c := range MatchConditions(obj) {
		if c.Name == ScopeCondition && c.Expression != expr {
			c.Expression, changed = expr, true
		}
	}
	return changed
}

// MatchConditions are the match conditions of obj, a webhook
// configuration (every webhook's) or a validating admission policy, as
// pointers into it; none for an object of another kind.
func MatchConditions(obj client.Object) []*admissionregistrationv1.MatchCondition {
	var out []*admissionregistrationv1.MatchCondition
	add := func(conds []admissionregistrationv1.MatchCondition) {
		for i := range conds {
			out = append(out, &conds[i])
		}
	}
	switch o := obj.(type) {
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		for i := range o.Webhooks {
			add(o.Webhooks[i].MatchConditions)
		}
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		for i := range o.Webhooks {
			add(o.Webhooks[i].MatchConditions)
		}
	case *admissionregistrationv1.ValidatingAdmissionPolicy:
		add(o.Spec.MatchConditions)
	}
	return out
}
