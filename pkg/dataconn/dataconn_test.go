package dataconn

import (
	"encoding/json"
	"os"
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
			case ConnectionsEnv, JobNameEnv, OutputEnv, ForwardEnv:
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
