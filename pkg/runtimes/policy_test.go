package runtimes

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

var (
	cmpQuantity  = cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })
	dedicatedGPU = corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
)

func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func errStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

func TestParsePolicy(t *testing.T) {
	cases := map[string]struct {
		annotations map[string]string
		want        Policy
		wantErrs    []string
	}{
		"none": {},
		"all": {
			annotations: map[string]string{
				MaxWorkersAnnotation: "16", MaxGPUsPerWorkerAnnotation: "8", RequiredNodeSelectorAnnotation: "pool=gpu, zone=east",
				RequiredTolerationsAnnotation: "dedicated=gpu:NoSchedule, pool",
				GangTimeoutAnnotation:         "10m", ProgressTimeoutAnnotation: "30m",
			},
			want: Policy{MaxWorkers: 16, MaxGPUsPerWorker: ptr.To(resource.MustParse("8")), RequiredNodeSelector: map[string]string{"pool": "gpu", "zone": "east"},
				RequiredTolerations: []corev1.Toleration{dedicatedGPU, {Key: "pool", Operator: corev1.TolerationOpExists}},
				GangTimeout:         10 * time.Minute, ProgressTimeout: 30 * time.Minute},
		},
		"a misspelled key is refused, with the closest policy": {
			annotations: map[string]string{PolicyPrefix + "max-worker": "4", PolicyPrefix + "zzz": "1", "other.example.com/max-worker": "4"},
			wantErrs: []string{
				`metadata.annotations[policy.mpijob.dev/max-worker]: Unsupported value: "policy.mpijob.dev/max-worker": is not a policy of mpijob, so it would limit nothing: did you mean policy.mpijob.dev/max-workers?`,
				`metadata.annotations[policy.mpijob.dev/zzz]: Unsupported value: "policy.mpijob.dev/zzz": is not a policy of mpijob, so it would limit nothing: the policies are policy.mpijob.dev/max-workers, policy.mpijob.dev/max-gpus-per-worker, policy.mpijob.dev/required-node-selector, policy.mpijob.dev/required-tolerations, policy.mpijob.dev/gang-scheduling-timeout, policy.mpijob.dev/progress-timeout, policy.mpijob.dev/end-stuck-after, policy.mpijob.dev/slow-rank-after`,
			},
		},
		"priority-class, which no job could satisfy, is refused with the way out": {
			annotations: map[string]string{PriorityClassAnnotation: "training"},
			wantErrs: []string{
				`metadata.annotations[policy.mpijob.dev/priority-class]: Invalid value: "training": is not a policy (no job could set a priority class, so it refused every job): remove it and set priorityClassName in the runtime's own pod templates, or give jobs Kueue priorities (label kueue.x-k8s.io/priority-class)`,
			},
		},
		"bad values name the annotation, the value and the form": {
			annotations: map[string]string{MaxWorkersAnnotation: "many", GangTimeoutAnnotation: "10", RequiredNodeSelectorAnnotation: "gpu", MaxGPUsPerWorkerAnnotation: "-1",
				RequiredTolerationsAnnotation: "dedicated=gpu:NoSchedul", MinAvailableAnnotation: "4", ProgressTimeoutAnnotation: "-5m"},
			wantErrs: []string{
				`metadata.annotations[policy.mpijob.dev/max-workers]: Invalid value: "many": must be a whole number of Workers, at least 1`,
				`metadata.annotations[policy.mpijob.dev/max-gpus-per-worker]: Invalid value: "-1": must be a GPU count such as 4`,
				`metadata.annotations[policy.mpijob.dev/required-node-selector]: Invalid value: "gpu": must be label pairs such as gpu=a100,zone=east; "gpu" has no '='`,
				`metadata.annotations[policy.mpijob.dev/required-tolerations]: Invalid value: "dedicated=gpu:NoSchedul": "dedicated=gpu:NoSchedul": the effect must be NoSchedule, PreferNoSchedule or NoExecute, as in dedicated=gpu:NoSchedule`,
				`metadata.annotations[policy.mpijob.dev/gang-scheduling-timeout]: Invalid value: "10": must be a positive duration such as 10m`,
				`metadata.annotations[policy.mpijob.dev/progress-timeout]: Invalid value: "-5m": must be a positive duration such as 30m, or "off"`,
				`metadata.annotations[policy.mpijob.dev/min-available]: Invalid value: "4": an MPI job needs every Worker placed before its Launcher starts, so a smaller gang cannot run: remove this annotation; Kueue admits jobs whole, and policy.mpijob.dev/gang-scheduling-timeout reports jobs that wait too long`,
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, errs := ParsePolicy(tc.annotations)
			if diff := cmp.Diff(tc.wantErrs, errStrings(errs)); diff != "" {
				t.Errorf("errors (-want,+got):\n%s", diff)
			}
			if len(tc.wantErrs) > 0 {
				return
			}
			if diff := cmp.Diff(tc.want, got, cmpQuantity); diff != "" {
				t.Errorf("policy (-want,+got):\n%s", diff)
			}
		})
	}
}

// A job's own progress timeout wins over its runtime's, "off" turns the
// check off for the job alone, and a bad job value (admission refuses it)
// leaves the runtime's.
func TestProgressTimeoutOf(t *testing.T) {
	rt := map[string]string{ProgressTimeoutAnnotation: "15m"}
	cases := map[string]struct {
		runtime, job map[string]string
		want         time.Duration
	}{
		"the runtime's":                       {runtime: rt, want: 15 * time.Minute},
		"the job's wins":                      {runtime: rt, job: map[string]string{ProgressTimeoutAnnotation: "2h"}, want: 2 * time.Hour},
		"the job turns it off":                {runtime: rt, job: map[string]string{ProgressTimeoutAnnotation: "off"}, want: 0},
		"0 is off too":                        {runtime: rt, job: map[string]string{ProgressTimeoutAnnotation: "0"}, want: 0},
		"a bad job value keeps the runtime's": {runtime: rt, job: map[string]string{ProgressTimeoutAnnotation: "soon"}, want: 15 * time.Minute},
		"none anywhere":                       {want: 0},
		"only the job's":                      {job: map[string]string{ProgressTimeoutAnnotation: "90s"}, want: 90 * time.Second},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := ProgressTimeoutOf(tc.runtime, tc.job); got != tc.want {
				t.Errorf("ProgressTimeoutOf = %s, want %s", got, tc.want)
			}
		})
	}
}

// A job's own end-stuck-after wins over its runtime's, "off" keeps the job
// for good, and a bad job value (admission refuses it) leaves the
// runtime's.
func TestEndStuckAfterOf(t *testing.T) {
	rt := map[string]string{EndStuckAfterAnnotation: "10m"}
	cases := map[string]struct {
		runtime, job map[string]string
		want         time.Duration
	}{
		"the runtime's":                       {runtime: rt, want: 10 * time.Minute},
		"the job's wins":                      {runtime: rt, job: map[string]string{EndStuckAfterAnnotation: "45s"}, want: 45 * time.Second},
		"the job keeps itself":                {runtime: rt, job: map[string]string{EndStuckAfterAnnotation: "off"}, want: 0},
		"a bad job value keeps the runtime's": {runtime: rt, job: map[string]string{EndStuckAfterAnnotation: "-1m"}, want: 10 * time.Minute},
		"none anywhere":                       {want: 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := EndStuckAfterOf(tc.runtime, tc.job); got != tc.want {
				t.Errorf("EndStuckAfterOf = %s, want %s", got, tc.want)
			}
		})
	}
	if _, err := ParseEndStuckAfter(map[string]string{EndStuckAfterAnnotation: "soon"}); err == nil ||
		err.Error() != `metadata.annotations[policy.mpijob.dev/end-stuck-after]: Invalid value: "soon": must be a positive duration such as 10m, or "off"` {
		t.Errorf("end-stuck-after \"soon\": %v, want the annotation, the value and the form", err)
	}
}

func TestPodDemand(t *testing.T) {
	spec := &corev1.PodSpec{Containers: []corev1.Container{
		{Resources: corev1.ResourceRequirements{Limits: rl("nvidia.com/gpu", "2", "memory", "4Gi"), Requests: rl("memory", "1Gi")}},
		{Resources: corev1.ResourceRequirements{Requests: rl("cpu", "500m")}},
	}}
	req, lim := PodDemand(spec)
	if diff := cmp.Diff(rl("nvidia.com/gpu", "2", "memory", "1Gi", "cpu", "500m"), req, cmpQuantity); diff != "" {
		t.Errorf("requests (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(rl("nvidia.com/gpu", "2", "memory", "4Gi"), lim, cmpQuantity); diff != "" {
		t.Errorf("limits (-want,+got):\n%s", diff)
	}
}

// EachRequest gives what PodDemand's requests add up, container by
// container: a limit without a request stands for it, a request beside a
// limit counts alone, and nothing of a container without resources.
func TestEachRequest(t *testing.T) {
	spec := &corev1.PodSpec{Containers: []corev1.Container{
		{Resources: corev1.ResourceRequirements{Limits: rl("nvidia.com/gpu", "2", "memory", "4Gi"), Requests: rl("memory", "1Gi")}},
		{Resources: corev1.ResourceRequirements{Requests: rl("cpu", "500m", "memory", "512Mi")}},
		{},
	}}
	got := map[corev1.ResourceName][]string{}
	EachRequest(spec, func(name corev1.ResourceName, q resource.Quantity) {
		got[name] = append(got[name], q.String())
	})
	want := map[corev1.ResourceName][]string{"nvidia.com/gpu": {"2"}, "memory": {"1Gi", "512Mi"}, "cpu": {"500m"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("EachRequest (-want,+got):\n%s", diff)
	}
}

// A job's slow-rank-after wins over its runtime's; "off" turns it off; a
// bad value is refused naming the annotation and the form.
func TestSlowRankAfter(t *testing.T) {
	rt := map[string]string{SlowRankAfterAnnotation: "10m"}
	cases := map[string]struct {
		runtime, job map[string]string
		want         time.Duration
	}{
		"neither says: the default":      {want: DefaultSlowRankAfter},
		"the runtime's":                  {runtime: rt, want: 10 * time.Minute},
		"the job's wins":                 {runtime: rt, job: map[string]string{SlowRankAfterAnnotation: "30s"}, want: 30 * time.Second},
		"off on the job":                 {runtime: rt, job: map[string]string{SlowRankAfterAnnotation: "off"}, want: 0},
		"a bad job value: the runtime's": {runtime: rt, job: map[string]string{SlowRankAfterAnnotation: "soon"}, want: 10 * time.Minute},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := SlowRankAfterOf(tc.runtime, tc.job); got != tc.want {
				t.Errorf("SlowRankAfterOf = %s, want %s", got, tc.want)
			}
		})
	}
	_, _, err := ParseSlowRankAfter(map[string]string{SlowRankAfterAnnotation: "soon"})
	if err == nil || err.Error() != `metadata.annotations[policy.mpijob.dev/slow-rank-after]: Invalid value: "soon": must be a positive duration such as 5m, or "off"` {
		t.Errorf("slow-rank-after \"soon\": %v", err)
	}
	_, _, err = ParseSlowRankAfter(map[string]string{SlowRankAfterAnnotation: "3h"})
	if err == nil || err.Error() != `metadata.annotations[policy.mpijob.dev/slow-rank-after]: Invalid value: "3h": must be at most 2h: the manager keeps a job's step reports that long; use a shorter window such as 5m, or "off"` {
		t.Errorf("slow-rank-after \"3h\": %v", err)
	}
	if d, _, err := ParseSlowRankAfter(map[string]string{SlowRankAfterAnnotation: "2h"}); err != nil || d != MaxSlowRankAfter {
		t.Errorf("slow-rank-after \"2h\": %s, %v; want the longest window", d, err)
	}
}
