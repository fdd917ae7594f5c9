package manifests

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
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
