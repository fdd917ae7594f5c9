package manifests

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestParse(t *testing.T) {
	cases := map[string]struct {
		in       string
		wantObjs []string
		wantErr  string
	}{
		"several documents, empty ones skipped": {
			in:       "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\n---\n# only a comment\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b, namespace: a}\n",
			wantObjs: []string{"Namespace /a", "ConfigMap a/b"},
		},
		"json works too": {
			in:       `{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "j"}}`,
			wantObjs: []string{"Namespace /j"},
		},
		"missing kind names the document": {
			in:      "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\napiVersion: v1\nmetadata: {name: b}\n",
			wantErr: "in.yaml: document 2 has no apiVersion or kind",
		},
		"broken yaml names the document": {
			in:      "apiVersion: v1\nkind: [unclosed\n",
			wantErr: "in.yaml: document 1 is not valid YAML",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs, err := Parse(strings.NewReader(tc.in), "in.yaml")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range objs {
				got = append(got, o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName())
			}
			if diff := cmp.Diff(tc.wantObjs, got); diff != "" {
				t.Errorf("objects (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestParseFilesReadsRepositoryConfig(t *testing.T) {
	objs, err := ParseFiles("../../config/runtimes")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range objs {
		names = append(names, o.GetName())
	}
	if diff := cmp.Diff([]string{"mpi-deepspeed", "mpi-horovod", "mpi-intel", "mpi-mpich", "mpi-openmpi-gpu", "mpi-openmpi", "mpi-openmpi5"}, names); diff != "" {
		t.Errorf("runtimes (-want,+got):\n%s", diff)
	}
}

func TestInstallOrder(t *testing.T) {
	objs, err := Parse(strings.NewReader(`apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: default, namespace: team-a}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: c, namespace: team-a}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-a}
`), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range InstallOrder(objs) {
		got = append(got, o.GetKind())
	}
	if diff := cmp.Diff([]string{"Namespace", "LocalQueue", "ConfigMap"}, got); diff != "" {
		t.Errorf("InstallOrder (-want,+got):\n%s", diff)
	}
}

func TestSetImages(t *testing.T) {
	dep := func(images ...string) string {
		var cs strings.Builder
		for i, img := range images {
			fmt.Fprintf(&cs, "      - {name: c%d, image: %q}\n", i, img)
		}
		return "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d, namespace: n}\nspec:\n  template:\n    spec:\n      containers:\n" + cs.String()
	}
	images := map[string]string{"ghcr.io/mpijob/mpijob-manager": "ghcr.io/mpijob/mpijob-manager:dev-1", "localhost:5000/x": "localhost:5000/x:2"}
	cases := map[string]struct {
		in    string
		want  []string
		wantN int
	}{
		"tag replaced":               {in: dep("ghcr.io/mpijob/mpijob-manager:v0.1.0"), want: []string{"ghcr.io/mpijob/mpijob-manager:dev-1"}, wantN: 1},
		"digest replaced":            {in: dep("ghcr.io/mpijob/mpijob-manager@sha256:abc"), want: []string{"ghcr.io/mpijob/mpijob-manager:dev-1"}, wantN: 1},
		"registry port is not a tag": {in: dep("localhost:5000/x"), want: []string{"localhost:5000/x:2"}, wantN: 1},
		"other images kept": {
			in:   dep("ghcr.io/mpijob/mpijob-manager-other:v1", "ghcr.io/mpijob/mpijob-manager:v0.1.0"),
			want: []string{"ghcr.io/mpijob/mpijob-manager-other:v1", "ghcr.io/mpijob/mpijob-manager:dev-1"}, wantN: 1,
		},
		"not a Deployment": {in: "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - {name: c, image: ghcr.io/mpijob/mpijob-manager:v0.1.0}\n", wantN: 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs, err := Parse(strings.NewReader(tc.in), "in.yaml")
			if err != nil {
				t.Fatal(err)
			}
			n, err := SetImages(objs, images)
			if err != nil {
				t.Fatal(err)
			}
			if n != tc.wantN {
				t.Errorf("replaced %d, want %d", n, tc.wantN)
			}
			if tc.want == nil {
				return
			}
			cs, _, _ := unstructured.NestedSlice(objs[0].Object, "spec", "template", "spec", "containers")
			var got []string
			for _, c := range cs {
				got = append(got, c.(map[string]any)["image"].(string))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("images (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestKustomizeInstallOrder(t *testing.T) {
	objs, err := Kustomize("../../config/default")
	if err != nil {
		t.Fatal(err)
	}
	last := objs[len(objs)-1].GetKind()
	if !strings.HasSuffix(last, "WebhookConfiguration") || objs[0].GetKind() != "Namespace" {
		t.Errorf("config/default's order starts with %s and ends with %s; want Namespace first and the webhook configurations last", objs[0].GetKind(), last)
	}
	// What kustomize builds takes an image override (its numbers are JSON
	// numbers, which unstructured's deep copy needs).
	n, err := SetImages(objs, map[string]string{"ghcr.io/mpijob/mpijob-manager": "m:1", "ghcr.io/mpijob/mpijob-dashboard": "d:1"})
	if err != nil || n != 2 {
		t.Errorf("SetImages on config/default replaced %d images (err %v), want the manager's and the dashboard's", n, err)
	}
	if _, err := Kustomize("../../config/nosuch"); err == nil || !strings.Contains(err.Error(), "config/nosuch") {
		t.Errorf("a missing folder: err = %v, want one naming it", err)
	}
}
