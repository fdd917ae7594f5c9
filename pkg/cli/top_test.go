package cli

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// top shows each pod's GPUs with their utilisation where DCGM's exporter
// reports it, and the GPUs alone where it does not.
func TestTopShowsGPUUse(t *testing.T) {
	prom := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		w.Header().Set("Content-Type", "application/json")
		q := r.Form.Get("query")
		switch {
		case strings.Contains(q, "DCGM_FI_DEV_GPU_UTIL"):
			_, _ = w.Write([]byte(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"pod":"gpu-node-0-0-abcde"},"value":[1,"87.4"]}]}}`))
		case strings.Contains(q, "cpu"):
			_, _ = w.Write([]byte(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"pod":"gpu-node-0-0-abcde"},"value":[1,"0.5"]},{"metric":{"pod":"gpu-node-0-1-abcde"},"value":[1,"0.25"]}]}}`))
		default:
			_, _ = w.Write([]byte(`{"status":"success","data":{"resultType":"vector","result":[]}}`))
		}
	}))
	defer prom.Close()
	withGPU := func(p *corev1.Pod) *corev1.Pod {
		p.Labels["batch.kubernetes.io/job-completion-index"] = p.Name[len("gpu-node-0-") : len("gpu-node-0-")+1]
		p.Spec.Containers = []corev1.Container{{Name: "node", Resources: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}}}}
		p.Status.Phase = corev1.PodRunning
		return p
	}
	job := fakeJob("gpu")
	job.Spec.Trainer = nil
	o, out, errOut := fakeOptions(t, interceptor.Funcs{}, job, withGPU(fakePod("gpu", "node", 0)), withGPU(fakePod("gpu", "node", 1)))
	top := &topOptions{Options: o, name: "gpu", promURL: prom.URL, now: func() time.Time { return time.Unix(1800000000, 0) }}
	if err := top.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, l := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			rows[f[0]] = strings.Join(f, " ")
		}
	}
	if r := rows["gpu-node-0-0-abcde"]; !strings.Contains(r, "2 (87% used)") {
		t.Errorf("Worker 0's row %q lacks its GPUs' use\n%s%s", r, out, errOut)
	}
	if r := rows["gpu-node-0-1-abcde"]; !strings.Contains(r, " 2 ") || strings.Contains(r, "used") {
		t.Errorf("Worker 1's row %q: want its 2 GPUs and no use (no DCGM sample)\n%s", r, out)
	}
}

func TestGPUCell(t *testing.T) {
	for _, tc := range []struct {
		gpus    string
		percent *float64
		want    string
	}{
		{"", nil, "-"},
		{"2", nil, "2"},
		{"2", ptr.To(87.4), "2 (87% used)"},
		{"", ptr.To(3.0), "3% used"},
	} {
		if got := gpuCell(tc.gpus, tc.percent); got != tc.want {
			t.Errorf("gpuCell(%q, %v) = %q, want %q", tc.gpus, tc.percent, got, tc.want)
		}
	}
}
