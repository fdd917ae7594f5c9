package dataconn

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

type secretCase struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	Data        map[string]string `json:"data"`
}

func TestCheckVectors(t *testing.T) {
	b, err := os.ReadFile("testdata/connections.json")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Check []struct {
			Name       string      `json:"name"`
			Connection string      `json:"connection"`
			Secret     *secretCase `json:"secret"`
			Problem    *Problem    `json:"problem"`
		} `json:"check"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Check) < 5 {
		t.Fatalf("only %d vectors", len(v.Check))
	}
	for _, tc := range v.Check {
		t.Run(tc.Name, func(t *testing.T) {
			var got *Problem
			if tc.Secret == nil {
				got = Missing(tc.Connection)
			} else {
				data := map[string][]byte{}
				for k, s := range tc.Secret.Data {
					data[k] = []byte(s)
				}
				got = Check(tc.Connection, tc.Secret.Labels, tc.Secret.Annotations, data)
			}
			if diff := cmp.Diff(tc.Problem, got); diff != "" {
				t.Errorf("Check (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestEnvNeverCarriesValuesOfTheSecret(t *testing.T) {
	env := Env("digits", []string{"local-s3", "archive"}, nil)
	for _, e := range env {
		if e.ValueFrom == nil {
			switch e.Name {
			case ConnectionsEnv, JobNameEnv, OutputEnv, CheckpointEnv, ForwardEnv:
			default:
				t.Errorf("%s has a value; a connection's keys must be Secret references", e.Name)
			}
			continue
		}
		if e.ValueFrom.SecretKeyRef == nil || !IsJobEnv(e) {
			t.Errorf("%s: not a reference to a connection's key: %+v", e.Name, e.ValueFrom)
		}
	}
	got := map[string]string{}
	for _, e := range env {
		got[e.Name] = e.Value
	}
	if got[OutputEnv] != "s3://$(AWS_S3_BUCKET)/digits/" {
		t.Errorf("%s = %q", OutputEnv, got[OutputEnv])
	}
	if diff := cmp.Diff([]string{"local-s3", "archive"}, ConnectionsOf(env)); diff != "" {
		t.Errorf("ConnectionsOf (-want,+got):\n%s", diff)
	}
}

func TestIsJobEnv(t *testing.T) {
	ref := func(name, key string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "x"}, Key: key}}}
	}
	cases := map[string]struct {
		e    corev1.EnvVar
		want bool
	}{
		"plain key":             {ref("AWS_S3_BUCKET", "AWS_S3_BUCKET"), true},
		"prefixed key":          {ref("ARCHIVE_AWS_S3_BUCKET", "AWS_S3_BUCKET"), true},
		"other key of a secret": {ref("AWS_S3_BUCKET", "ssh-privatekey"), false},
		"renamed key":           {ref("TOKEN", "AWS_ACCESS_KEY_ID"), false},
		"job name value":        {corev1.EnvVar{Name: JobNameEnv, Value: "j"}, true},
		"user variable":         {corev1.EnvVar{Name: "EPOCHS", Value: "3"}, false},
	}
	for name, tc := range cases {
		if got := IsJobEnv(tc.e); got != tc.want {
			t.Errorf("%s: IsJobEnv = %v, want %v", name, got, tc.want)
		}
	}
}

func TestValidatePVC(t *testing.T) {
	cases := map[string]struct {
		p  PVC
		ok bool
	}{
		"default path":       {PVC{Claim: "data"}, true},
		"own path":           {PVC{Claim: "data", MountPath: "/mnt/in"}, true},
		"relative path":      {PVC{Claim: "data", MountPath: "mnt/in"}, false},
		"hides ssh keys":     {PVC{Claim: "data", MountPath: "/home/mpiuser"}, false},
		"hides the hostfile": {PVC{Claim: "data", MountPath: "/etc/mpi"}, false},
		"bad claim":          {PVC{Claim: "Data_1"}, false},
		"parent folder":      {PVC{Claim: "d", MountPath: "/mnt/../etc"}, false},
	}
	for name, tc := range cases {
		if got := ValidatePVC(tc.p) == ""; got != tc.ok {
			t.Errorf("%s: ValidatePVC ok = %v, want %v (%q)", name, got, tc.ok, ValidatePVC(tc.p))
		}
	}
}

func TestValidateConfigMap(t *testing.T) {
	cases := map[string]struct {
		c    ConfigMap
		want string // a word of the problem; "" when none
	}{
		"default path":          {c: ConfigMap{Name: "train-cfg"}},
		"own path":              {c: ConfigMap{Name: "train-cfg", MountPath: "/mnt/cfg"}},
		"not a name":            {c: ConfigMap{Name: "Train_Cfg"}, want: "is not a ConfigMap name"},
		"no name":               {c: ConfigMap{}, want: "is not a ConfigMap name"},
		"relative path":         {c: ConfigMap{Name: "cfg", MountPath: "cfg"}, want: "must be an absolute path"},
		"hides the ssh keys":    {c: ConfigMap{Name: "cfg", MountPath: "/home/mpiuser/.ssh"}, want: "would hide /home/mpiuser"},
		"a colon in the path":   {c: ConfigMap{Name: "cfg", MountPath: "/mnt/a:b"}, want: "without ':' or '..'"},
		"hides the system /usr": {c: ConfigMap{Name: "cfg", MountPath: "/usr"}, want: "would hide /usr"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := ValidateConfigMap(tc.c)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("ValidateConfigMap(%+v) = %q, want %q", tc.c, got, tc.want)
			}
		})
	}
}

// Volumes mounts each PVC read-write at its path and each ConfigMap
// read-only, with volume names that Kubernetes accepts (63 characters at
// most, however long the claim's name).
func TestVolumes(t *testing.T) {
	long := strings.Repeat("a", 70)
	vols, mounts := Volumes([]PVC{{Claim: "data"}, {Claim: "results", MountPath: "/mnt/out"}, {Claim: long}},
		ConfigMap{Name: "cfg"}, ConfigMap{Name: "hosts", MountPath: "/etc-own/hosts"})
	wantVols := []corev1.Volume{
		{Name: "pvc-data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}},
		{Name: "pvc-results", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "results"}}},
		{Name: ("pvc-" + long)[:63], VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: long}}},
		{Name: "cm-cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}},
		{Name: "cm-hosts", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "hosts"}}}},
	}
	wantMounts := []corev1.VolumeMount{
		{Name: "pvc-data", MountPath: "/mnt/data"},
		{Name: "pvc-results", MountPath: "/mnt/out"},
		{Name: ("pvc-" + long)[:63], MountPath: "/mnt/" + long},
		{Name: "cm-cfg", MountPath: "/config/cfg", ReadOnly: true},
		{Name: "cm-hosts", MountPath: "/etc-own/hosts", ReadOnly: true},
	}
	if diff := cmp.Diff(wantVols, vols); diff != "" {
		t.Errorf("volumes (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(wantMounts, mounts); diff != "" {
		t.Errorf("mounts (-want,+got):\n%s", diff)
	}
	if n := ConfigMapVolumeName(strings.Repeat("b-", 40)); len(n) > 63 || strings.HasSuffix(n, "-") {
		t.Errorf("ConfigMapVolumeName of a long name: %q (%d characters), want at most 63 and no trailing '-'", n, len(n))
	}
}

func TestProblemNamesConnectionAndKey(t *testing.T) {
	for _, tc := range []struct {
		p    Problem
		want string
	}{
		{Problem{Connection: "bucket", Problem: "is not a data connection"}, `data connection "bucket": is not a data connection`},
		{Problem{Connection: "bucket", Key: "AWS_S3_BUCKET", Problem: "is empty"}, `data connection "bucket", key AWS_S3_BUCKET: is empty`},
	} {
		if got := tc.p.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
}

func TestCheckpointPlace(t *testing.T) {
	cases := map[string]struct {
		conns []string
		pvcs  []PVC
		want  string
	}{
		"first data connection": {conns: []string{"local-s3", "archive"}, pvcs: []PVC{{Claim: "data"}}, want: "s3://$(AWS_S3_BUCKET)/digits/checkpoints/"},
		"first PVC":             {pvcs: []PVC{{Claim: "shared-data"}, {Claim: "other"}}, want: "file:///mnt/shared-data/digits/checkpoints/"},
		"PVC at its own path":   {pvcs: []PVC{{Claim: "data", MountPath: "/mnt/x"}}, want: "file:///mnt/x/digits/checkpoints/"},
		"no storage":            {want: ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := CheckpointsOf("digits", tc.conns, tc.pvcs); got != tc.want {
				t.Errorf("CheckpointsOf = %q, want %q", got, tc.want)
			}
			var got string
			for _, e := range Env("digits", tc.conns, tc.pvcs) {
				if e.Name == CheckpointEnv {
					got = e.Value
				}
			}
			if got != tc.want {
				t.Errorf("Env's %s = %q, want %q", CheckpointEnv, got, tc.want)
			}
		})
	}
}

func TestWithResume(t *testing.T) {
	env := WithResume(Env("b", nil, []PVC{{Claim: "data"}}), "file:///mnt/data/a/checkpoints/")
	if got := ResumeOf(env); got != "file:///mnt/data/a/checkpoints/" {
		t.Errorf("ResumeOf = %q", got)
	}
	for _, e := range env {
		if e.Name == ForwardEnv && !strings.HasSuffix(e.Value, ";"+ResumeEnv) {
			t.Errorf("%s = %q: the ranks would not see %s", ForwardEnv, e.Value, ResumeEnv)
		}
	}
	if diff := cmp.Diff(Env("b", nil, []PVC{{Claim: "data"}}), WithResume(Env("b", nil, []PVC{{Claim: "data"}}), "")); diff != "" {
		t.Errorf("WithResume with no URI changed env:\n%s", diff)
	}
}
