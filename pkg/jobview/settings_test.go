package jobview

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/jobspec"
	"github.com/mpijob/mpijob/pkg/queue"
)

func TestSettingsOf(t *testing.T) {
	withRetries := &trainer.TrainingRuntimeSpec{Template: trainer.JobSetTemplateSpec{Spec: jobsetv1alpha2.JobSetSpec{
		FailurePolicy: &jobsetv1alpha2.FailurePolicy{MaxRestarts: 2}}}}
	cases := map[string]struct {
		tj   *trainer.TrainJob
		spec *trainer.TrainingRuntimeSpec
		want Settings
	}{
		"nothing set": {tj: &trainer.TrainJob{}, want: Settings{}},
		"a grace period (--grace-period 5m)": {tj: &trainer.TrainJob{}, spec: func() *trainer.TrainingRuntimeSpec {
			rj := jobsetv1alpha2.ReplicatedJob{Name: api.WorkerJob}
			rj.Template.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](300)
			return &trainer.TrainingRuntimeSpec{Template: trainer.JobSetTemplateSpec{Spec: jobsetv1alpha2.JobSetSpec{ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{rj}}}}
		}(), want: Settings{GracePeriod: "5m"}},
		"everything set": {
			tj: &trainer.TrainJob{
				ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{api.DescriptionAnnotation: "digits, 8 ranks"},
					Labels: map[string]string{queue.PriorityLabel: "high"}},
				Spec: trainer.TrainJobSpec{ActiveDeadlineSeconds: 5400}},
			spec: withRetries,
			want: Settings{Description: "digits, 8 ranks", Priority: "high", Timeout: "1h30m", TimeoutSeconds: 5400, Retries: 2},
		},
		"placement from the runtime patches: describe shows the tolerations": {
			tj: func() *trainer.TrainJob {
				tj := &trainer.TrainJob{}
				tj.Spec.RuntimePatches = []trainer.RuntimePatch{jobspec.PodPatch{NodeSelector: map[string]string{"disktype": "ssd"},
					Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "mpi", Effect: corev1.TaintEffectNoSchedule},
						{Key: "spot", Operator: corev1.TolerationOpExists}},
					ImagePullSecrets: []string{"regcred"}}.RuntimePatch()}
				return tj
			}(),
			want: Settings{NodeSelector: map[string]string{"disktype": "ssd"}, Tolerations: []string{"dedicated=mpi:NoSchedule", "spot"}, ImagePullSecrets: []string{"regcred"}},
		},
		"runtime not read: no retries": {
			tj:   &trainer.TrainJob{Spec: trainer.TrainJobSpec{ActiveDeadlineSeconds: 40}},
			want: Settings{Timeout: "40s", TimeoutSeconds: 40},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, SettingsOf(tc.tj, tc.spec)); diff != "" {
				t.Errorf("SettingsOf (-want +got):\n%s", diff)
			}
		})
	}
}
