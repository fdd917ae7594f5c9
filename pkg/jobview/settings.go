package jobview

import (
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/jobspec"
	"github.com/mpijob/mpijob/pkg/queue"
	"github.com/mpijob/mpijob/pkg/runtimes"
)

// Settings are what a job's creator set beyond its shape
// (docs/training.md, "Everything a job sets at create time"), as
// describe and the dashboard's job page show them; a field left empty
// was not set.
type Settings struct {
	Description string `json:"description,omitempty"`
	// Priority is the Kueue WorkloadPriorityClass.
	Priority string `json:"priority,omitempty"`
	// Timeout is spec.activeDeadlineSeconds as --timeout takes it
	// ("1h30m"), TimeoutSeconds the number itself.
	Timeout        string `json:"timeout,omitempty"`
	TimeoutSeconds int64  `json:"timeoutSeconds,omitempty"`
	// Retries is how many times JobSet starts the whole job again after
	// a failure (the job's runtime's failurePolicy.maxRestarts).
	Retries int32 `json:"retries,omitempty"`
	// GracePeriod is how long the ranks have to save and exit when the
	// job is stopped (its runtime's terminationGracePeriodSeconds, as
	// --grace-period takes it: "1m"); empty when the runtime sets none.
	GracePeriod string `json:"gracePeriod,omitempty"`
	// NodeSelector, Tolerations (as --toleration takes them) and
	// ImagePullSecrets are what the job's runtime patches set on its pods.
	NodeSelector     map[string]string `json:"nodeSelector,omitempty"`
	Tolerations      []string          `json:"tolerations,omitempty"`
	ImagePullSecrets []string          `json:"imagePullSecrets,omitempty"`
}

// SettingsOf reads the settings of tj, whose runtime's spec is spec (nil
// when it could not be read: no retries shown).
func SettingsOf(tj *trainer.TrainJob, spec *trainer.TrainingRuntimeSpec) Settings {
	s := Settings{Description: tj.Annotations[api.DescriptionAnnotation], Priority: tj.Labels[queue.PriorityLabel]}
	if d := tj.Spec.ActiveDeadlineSeconds; d > 0 {
		s.Timeout, s.TimeoutSeconds = jobspec.FormatTimeout(d), d
	}
	pp := jobspec.PlacementOf(tj)
	s.NodeSelector, s.ImagePullSecrets = pp.NodeSelector, pp.ImagePullSecrets
	for _, t := range pp.Tolerations {
		s.Tolerations = append(s.Tolerations, runtimes.FormatToleration(t))
	}
	if spec != nil && spec.Template.Spec.FailurePolicy != nil {
		s.Retries = spec.Template.Spec.FailurePolicy.MaxRestarts
	}
	if spec != nil {
		if g := jobspec.GracePeriodOf(spec); g != nil {
			s.GracePeriod = jobspec.FormatTimeout(*g)
		}
	}
	return s
}
