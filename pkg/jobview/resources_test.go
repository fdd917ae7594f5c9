package jobview

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Sums read as people write them: no "1000100m" CPUs or "134217738" bytes.
func TestReadable(t *testing.T) {
	sum := func(a, b string) resource.Quantity {
		q := resource.MustParse(a)
		q.Add(resource.MustParse(b))
		return q
	}
	cases := map[string]struct {
		name corev1.ResourceName
		q    resource.Quantity
		want string
	}{
		"whole CPUs":             {corev1.ResourceCPU, sum("2", "1"), "3"},
		"millicores under one":   {corev1.ResourceCPU, resource.MustParse("500m"), "500m"},
		"cores and millicores":   {corev1.ResourceCPU, sum("1000", "100m"), "1000.1"},
		"binary memory":          {corev1.ResourceMemory, sum("1Gi", "1Gi"), "2Gi"},
		"bytes beside mebibytes": {corev1.ResourceMemory, sum("128Mi", "10"), "128Mi"},
		"decimal and binary":     {corev1.ResourceMemory, sum("1Gi", "500M"), "1.47Gi"},
		"a few bytes":            {corev1.ResourceMemory, resource.MustParse("10"), "10"},
		"GPUs as they are":       {"nvidia.com/gpu", sum("4", "4"), "8"},
		"ephemeral storage":      {corev1.ResourceEphemeralStorage, sum("10Gi", "1G"), "10.9Gi"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Readable(tc.name, tc.q); got != tc.want {
				t.Errorf("Readable(%s, %s) = %q, want %q", tc.name, tc.q.String(), got, tc.want)
			}
		})
	}
}
