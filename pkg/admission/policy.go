package admission

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Runtime policy annotations. Administrators put them on a
// ClusterTrainingRuntime (or TrainingRuntime); admission enforces them on
// jobs created afterwards, so editing a runtime never touches running jobs.
const (
	PolicyPrefix                   = "policy.mpijob.dev/"
	MaxWorkersAnnotation           = PolicyPrefix + "max-workers"
	MaxGPUsPerWorkerAnnotation     = PolicyPrefix + "max-gpus-per-worker"
	RequiredNodeSelectorAnnotation = PolicyPrefix + "required-node-selector"
	PriorityClassAnnotation        = PolicyPrefix + "priority-class"
	GangTimeoutAnnotation          = PolicyPrefix + "gang-scheduling-timeout"
	MinAvailableAnnotation         = PolicyPrefix + "min-available"
)

// Policy is what an administrator allows jobs of one runtime.
type Policy struct {
	// MaxWorkers caps the Workers of a job (0: no cap).
	MaxWorkers int32
	// MaxGPUsPerWorker caps nvidia.com/gpu per Worker (nil: no cap).
	MaxGPUsPerWorker *resource.Quantity
	// RequiredNodeSelector must hold on every pod of the job.
	RequiredNodeSelector map[string]string
	// PriorityClass every pod of the job runs with ("" for any).
	PriorityClass string
	// GangTimeout is how long Workers may wait to be placed together.
	GangTimeout time.Duration
	// MinAvailable is how many Workers must be placeable for the job to start (0: all).
	MinAvailable int32
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
	p.PriorityClass = strings.TrimSpace(annotations[PriorityClassAnnotation])
	if v, ok := annotations[GangTimeoutAnnotation]; ok {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil || d <= 0 {
			errs = append(errs, field.Invalid(path.Key(GangTimeoutAnnotation), v, "must be a positive duration such as 10m"))
		} else {
			p.GangTimeout = d
		}
	}
	if v, ok := annotations[MinAvailableAnnotation]; ok {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		if err != nil || n < 1 {
			errs = append(errs, field.Invalid(path.Key(MinAvailableAnnotation), v, "must be a whole number of Workers, at least 1"))
		} else {
			p.MinAvailable = int32(n)
		}
	}
	return p, errs
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

// FormatSelector renders a selector as "k=v,k2=v2", sorted.
func FormatSelector(sel map[string]string) string {
	keys := make([]string, 0, len(sel))
	for k := range sel {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+sel[k])
	}
	return strings.Join(parts, ",")
}
