package jobspec

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func TestTimeout(t *testing.T) {
	cases := map[string]struct {
		in      string
		secs    int64
		back    string
		wantErr bool
	}{
		"minutes":                   {in: "90m", secs: 5400, back: "1h30m"},
		"hours and minutes":         {in: "1h30m", secs: 5400, back: "1h30m"},
		"seconds":                   {in: "45s", secs: 45, back: "45s"},
		"every unit":                {in: "2h3m4s", secs: 7384, back: "2h3m4s"},
		"more minutes than an hour": {in: "61m", secs: 3660, back: "1h1m"},
		"a bare number":             {in: "90", wantErr: true},
		"days":                      {in: "1d", wantErr: true},
		"a fraction":                {in: "1.5h", wantErr: true},
		"units out of order":        {in: "30m1h", wantErr: true},
		"zero":                      {in: "0s", wantErr: true},
		"negative":                  {in: "-5m", wantErr: true},
		"empty":                     {in: "", wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			secs, err := ParseTimeout(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ParseTimeout(%q) = %d, %v; want error %v", tc.in, secs, err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			if secs != tc.secs {
				t.Errorf("ParseTimeout(%q) = %d, want %d", tc.in, secs, tc.secs)
			}
			if got := FormatTimeout(secs); got != tc.back {
				t.Errorf("FormatTimeout(%d) = %q, want %q", secs, got, tc.back)
			}
		})
	}
}

func TestParseToleration(t *testing.T) {
	cases := map[string]struct {
		in      string
		want    corev1.Toleration
		wantErr bool
	}{
		"key, value and effect": {in: "dedicated=mpi:NoSchedule", want: corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "mpi", Effect: corev1.TaintEffectNoSchedule}},
		"any value":             {in: "spot:NoExecute", want: corev1.Toleration{Key: "spot", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}},
		"every effect":          {in: "spot", want: corev1.Toleration{Key: "spot", Operator: corev1.TolerationOpExists}},
		"an unknown effect":     {in: "spot:Sometimes", wantErr: true},
		"two at once":           {in: "a,b", wantErr: true},
		"no key":                {in: "=v:NoSchedule", wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseToleration(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ParseToleration(%q) = %+v, %v; want error %v", tc.in, got, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); !tc.wantErr && diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}
