package runtimes

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"

	"github.com/mpijob/mpijob/pkg/suggest"
)

// Runtime policy annotations. Administrators put them on a
// ClusterTrainingRuntime (or TrainingRuntime); admission enforces them on
// jobs created afterwards, so editing a runtime never touches running jobs.
const (
	PolicyPrefix                   = "policy.mpijob.dev/"
	MaxWorkersAnnotation           = PolicyPrefix + "max-workers"
	MaxGPUsPerWorkerAnnotation     = PolicyPrefix + "max-gpus-per-worker"
	RequiredNodeSelectorAnnotation = PolicyPrefix + "required-node-selector"
	RequiredTolerationsAnnotation  = PolicyPrefix + "required-tolerations"
	GangTimeoutAnnotation          = PolicyPrefix + "gang-scheduling-timeout"
	// ProgressTimeoutAnnotation, on a runtime or on a job (the job's wins):
	// a running job whose Launcher prints nothing for longer gets a
	// NoProgress Warning. Off by default.
	ProgressTimeoutAnnotation = PolicyPrefix + "progress-timeout"
	// EndStuckAfterAnnotation, on a runtime or on a job (the job's wins):
	// how long a job that can never finish (a rank failed while the others
	// wait, an image that cannot be pulled, Workers no node can ever take)
	// is left before mpijob-manager ends it. Off when absent.
	EndStuckAfterAnnotation = PolicyPrefix + "end-stuck-after"
	// SlowRankAfterAnnotation, on a runtime or on a job (the job's wins):
	// how long a rank must stay slower than the others (the ranks' step
	// times in their progress reports) before a SlowRank Warning names it.
	// DefaultSlowRankAfter when absent; "off" turns it off.
	SlowRankAfterAnnotation = PolicyPrefix + "slow-rank-after"
	// MinAvailableAnnotation is refused: see ParsePolicy.
	MinAvailableAnnotation = PolicyPrefix + "min-available"
	// PriorityClassAnnotation is refused: see ParsePolicy.
	PriorityClassAnnotation = PolicyPrefix + "priority-class"
)

// PolicyKeys are the policy annotations a runtime may carry. Any other
// key under PolicyPrefix is refused, so a misspelled limit is never
// silently off.
var PolicyKeys = []string{
	MaxWorkersAnnotation, MaxGPUsPerWorkerAnnotation, RequiredNodeSelectorAnnotation, RequiredTolerationsAnnotation,
	GangTimeoutAnnotation, ProgressTimeoutAnnotation, EndStuckAfterAnnotation, SlowRankAfterAnnotation,
}

// DefaultSlowRankAfter is how long a rank stays slower than the others
// before it is named, when neither the runtime nor the job says.
const DefaultSlowRankAfter = 5 * time.Minute

// ParseSlowRankAfter reads policy.mpijob.dev/slow-rank-after (present is
// false when absent; 0 for "off").
func ParseSlowRankAfter(annotations map[string]string) (d time.Duration, present bool, ferr *field.Error) {
	if _, ok := annotations[SlowRankAfterAnnotation]; !ok {
		return 0, false, nil
	}
	d, ferr = parseOffDuration(annotations, SlowRankAfterAnnotation, "5m")
	if ferr == nil && d > MaxSlowRankAfter {
		ferr = field.Invalid(field.NewPath("metadata", "annotations").Key(SlowRankAfterAnnotation), annotations[SlowRankAfterAnnotation],
			"must be at most "+strings.TrimSuffix(MaxSlowRankAfter.String(), "0m0s")+": the manager keeps a job's step reports that long; use a shorter window such as 5m, or \"off\"")
		d = 0
	}
	return d, true, ferr
}

// MaxSlowRankAfter is the longest slow-rank window: how long the manager
// keeps a running job's step reports (diagnose.StepHistory).
const MaxSlowRankAfter = 2 * time.Hour

// SlowRankAfterOf is a job's slow-rank window: the job's annotation, else
// its runtime's, else DefaultSlowRankAfter (0: off).
func SlowRankAfterOf(runtimeAnnotations, jobAnnotations map[string]string) time.Duration {
	for _, a := range []map[string]string{jobAnnotations, runtimeAnnotations} {
		if d, ok, err := ParseSlowRankAfter(a); ok && err == nil {
			return d
		}
	}
	return DefaultSlowRankAfter
}

// Policy is what an administrator allows jobs of one runtime.
type Policy struct {
	// MaxWorkers caps the Workers of a job (0: no cap).
	MaxWorkers int32
	// MaxGPUsPerWorker caps nvidia.com/gpu per Worker (nil: no cap).
	MaxGPUsPerWorker *resource.Quantity
	// RequiredNodeSelector must hold on every pod of the job.
	RequiredNodeSelector map[string]string
	// RequiredTolerations must each be tolerated by every pod of the job.
	RequiredTolerations []corev1.Toleration
	// GangTimeout is how long Workers may wait to be placed together.
	GangTimeout time.Duration
	// ProgressTimeout is how long a running job's Launcher may print
	// nothing before the diagnosis warns (0: never).
	ProgressTimeout time.Duration
	// EndStuckAfter is how long a job that can never finish is left
	// before it is ended (0: never).
	EndStuckAfter time.Duration
}

// ParseProgressTimeout reads policy.mpijob.dev/progress-timeout from a
// runtime's or a job's annotations (0 when absent, or "off" or "0": no
// check).
func ParseProgressTimeout(annotations map[string]string) (time.Duration, *field.Error) {
	return parseOffDuration(annotations, ProgressTimeoutAnnotation, "30m")
}

// ParseEndStuckAfter reads policy.mpijob.dev/end-stuck-after from a
// runtime's or a job's annotations (0 when absent, or "off" or "0": a
// job that can never finish is only reported, never ended).
func ParseEndStuckAfter(annotations map[string]string) (time.Duration, *field.Error) {
	return parseOffDuration(annotations, EndStuckAfterAnnotation, "10m")
}

// parseOffDuration reads a positive duration or "off" (0) at key.
func parseOffDuration(annotations map[string]string, key, example string) (time.Duration, *field.Error) {
	v, ok := annotations[key]
	if !ok {
		return 0, nil
	}
	switch strings.TrimSpace(v) {
	case "off", "0":
		return 0, nil
	}
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil || d <= 0 {
		return 0, field.Invalid(field.NewPath("metadata", "annotations").Key(key), v, `must be a positive duration such as `+example+`, or "off"`)
	}
	return d, nil
}

// EndStuckAfterOf is how long a job that can never finish is left before
// it is ended: the job's own annotation when it has a valid one ("off"
// keeps the job), else its runtime's (0: never ended).
func EndStuckAfterOf(runtimeAnnotations, jobAnnotations map[string]string) time.Duration {
	if _, ok := jobAnnotations[EndStuckAfterAnnotation]; ok {
		if d, err := ParseEndStuckAfter(jobAnnotations); err == nil {
			return d
		}
	}
	d, _ := ParseEndStuckAfter(runtimeAnnotations)
	return d
}

// ProgressTimeoutOf is a job's progress timeout: the job's own annotation
// when it has a valid one ("off" turns the check off for the job), else
// its runtime's (0: no check).
func ProgressTimeoutOf(runtimeAnnotations, jobAnnotations map[string]string) time.Duration {
	if _, ok := jobAnnotations[ProgressTimeoutAnnotation]; ok {
		if d, err := ParseProgressTimeout(jobAnnotations); err == nil {
			return d
		}
	}
	d, _ := ParseProgressTimeout(runtimeAnnotations)
	return d
}

// ParsePolicy reads a runtime's policy annotations. Each bad value is an
// error naming the annotation, the value and the expected form.
func ParsePolicy(annotations map[string]string) (Policy, field.ErrorList) {
	var p Policy
	var errs field.ErrorList
	path := field.NewPath("metadata", "annotations")
	if v, ok := annotations[MaxWorkersAnnotation]; ok {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		if err != nil || n < 1 {
			errs = append(errs, field.Invalid(path.Key(MaxWorkersAnnotation), v, "must be a whole number of Workers, at least 1"))
		} else {
			p.MaxWorkers = int32(n)
		}
	}
	if v, ok := annotations[MaxGPUsPerWorkerAnnotation]; ok {
		q, err := resource.ParseQuantity(strings.TrimSpace(v))
		if err != nil || q.Sign() < 0 {
			errs = append(errs, field.Invalid(path.Key(MaxGPUsPerWorkerAnnotation), v, "must be a GPU count such as 4"))
		} else {
			p.MaxGPUsPerWorker = &q
		}
	}
	if v, ok := annotations[RequiredNodeSelectorAnnotation]; ok {
		sel, err := parseSelector(v)
		if err != nil {
			errs = append(errs, field.Invalid(path.Key(RequiredNodeSelectorAnnotation), v, err.Error()))
		} else {
			p.RequiredNodeSelector = sel
		}
	}
	if v, ok := annotations[RequiredTolerationsAnnotation]; ok {
		tols, err := ParseTolerations(v)
		if err != nil {
			errs = append(errs, field.Invalid(path.Key(RequiredTolerationsAnnotation), v, err.Error()))
		} else {
			p.RequiredTolerations = tols
		}
	}
	if v, ok := annotations[GangTimeoutAnnotation]; ok {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil || d <= 0 {
			errs = append(errs, field.Invalid(path.Key(GangTimeoutAnnotation), v, "must be a positive duration such as 10m"))
		} else {
			p.GangTimeout = d
		}
	}
	if d, err := ParseProgressTimeout(annotations); err != nil {
		errs = append(errs, err)
	} else {
		p.ProgressTimeout = d
	}
	if _, _, err := ParseSlowRankAfter(annotations); err != nil {
		errs = append(errs, err)
	}
	if d, err := ParseEndStuckAfter(annotations); err != nil {
		errs = append(errs, err)
	} else {
		p.EndStuckAfter = d
	}
	if v, ok := annotations[MinAvailableAnnotation]; ok {
		// Refused rather than ignored, so no administrator believes a
		// partial gang is allowed: an MPI job's Launcher starts only when
		// every Worker is Ready.
		errs = append(errs, field.Invalid(path.Key(MinAvailableAnnotation), v,
			"an MPI job needs every Worker placed before its Launcher starts, so a smaller gang cannot run: remove this annotation; Kueue admits jobs whole, and "+GangTimeoutAnnotation+" reports jobs that wait too long"))
	}
	if v, ok := annotations[PriorityClassAnnotation]; ok {
		// It denied every job: a job cannot set priorityClassName (Trainer's
		// runtimePatches have no such field), so no user could satisfy it.
		errs = append(errs, field.Invalid(path.Key(PriorityClassAnnotation), v,
			"is not a policy (no job could set a priority class, so it refused every job): remove it and set priorityClassName in the runtime's own pod templates, or give jobs Kueue priorities (label kueue.x-k8s.io/priority-class)"))
	}
	errs = append(errs, unknownPolicyKeys(annotations)...)
	return p, errs
}

// unknownPolicyKeys refuses annotations under PolicyPrefix that are no
// policy, suggesting the closest one.
func unknownPolicyKeys(annotations map[string]string) field.ErrorList {
	known := map[string]bool{MinAvailableAnnotation: true, PriorityClassAnnotation: true}
	for _, k := range PolicyKeys {
		known[k] = true
	}
	var keys []string
	for k := range annotations {
		if strings.HasPrefix(k, PolicyPrefix) && !known[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var errs field.ErrorList
	path := field.NewPath("metadata", "annotations")
	for _, k := range keys {
		msg := "is not a policy of mpijob, so it would limit nothing"
		if hint := suggest.Closest(k, PolicyKeys); hint != "" {
			msg += fmt.Sprintf(": did you mean %s?", hint)
		} else {
			msg += ": the policies are " + strings.Join(PolicyKeys, ", ")
		}
		errs = append(errs, field.NotSupported[string](path.Key(k), k, nil))
		errs[len(errs)-1].Detail = msg
	}
	return errs
}

// parseSelector reads "k=v,k2=v2".
func parseSelector(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("must be label pairs such as gpu=a100,zone=east; %q has no '='", part)
		}
		out[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("must name at least one label pair such as gpu=a100")
	}
	return out, nil
}

// ParseTolerations reads "key=value:Effect,key:Effect,key": a taint each pod
// must tolerate (no value: any value; no effect: every effect).
func ParseTolerations(s string) ([]corev1.Toleration, error) {
	var out []corev1.Toleration
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		t := corev1.Toleration{Operator: corev1.TolerationOpExists}
		kv, effect, hasEffect := strings.Cut(part, ":")
		if hasEffect {
			switch e := corev1.TaintEffect(strings.TrimSpace(effect)); e {
			case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
				t.Effect = e
			default:
				return nil, fmt.Errorf("%q: the effect must be NoSchedule, PreferNoSchedule or NoExecute, as in dedicated=gpu:NoSchedule", part)
			}
		}
		k, v, hasValue := strings.Cut(kv, "=")
		t.Key = strings.TrimSpace(k)
		if t.Key == "" {
			return nil, fmt.Errorf("%q has no taint key: write key=value:Effect, as in dedicated=gpu:NoSchedule", part)
		}
		if hasValue {
			t.Operator, t.Value = corev1.TolerationOpEqual, strings.TrimSpace(v)
		}
		out = append(out, t)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("must name at least one taint such as dedicated=gpu:NoSchedule")
	}
	return out, nil
}

// FormatToleration renders a required toleration the way the policy
// annotation writes it.
func FormatToleration(t corev1.Toleration) string {
	s := t.Key
	if t.Operator == corev1.TolerationOpEqual {
		s += "=" + t.Value
	}
	if t.Effect != "" {
		s += ":" + string(t.Effect)
	}
	return s
}

// Tolerates reports whether a pod's tolerations cover the taint a required
// toleration describes: the same key, the value (or any value with Exists),
// and the effect (or every effect).
func Tolerates(have []corev1.Toleration, want corev1.Toleration) bool {
	taint := corev1.Taint{Key: want.Key, Value: want.Value, Effect: want.Effect}
	for _, h := range have {
		if want.Effect == "" && h.Effect != "" {
			continue // the pod must tolerate the taint whatever its effect
		}
		if want.Operator == corev1.TolerationOpExists && h.Operator != corev1.TolerationOpExists && h.Key != "" {
			continue // any value of the key must be tolerated
		}
		if h.ToleratesTaint(klog.Background(), &taint, false) {
			return true
		}
	}
	return false
}
