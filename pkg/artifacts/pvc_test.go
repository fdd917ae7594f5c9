package artifacts

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
)

// vectors are shared with the SDK (sdk/python/tests).
type vectors struct {
	ReaderPod []struct {
		Name     string          `json:"name"`
		Claim    string          `json:"claim"`
		Mount    string          `json:"mount"`
		Template corev1.PodSpec  `json:"template"`
		Want     json.RawMessage `json:"want"`
	} `json:"reader_pod"`
	Find []struct {
		Name   string   `json:"name"`
		Output string   `json:"output"`
		Want   []Object `json:"want"`
		Error  string   `json:"error"`
	} `json:"find"`
}

func load(t *testing.T) vectors {
	t.Helper()
	b, err := os.ReadFile("testdata/reader.json")
	if err != nil {
		t.Fatal(err)
	}
	var v vectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// asMap is v as generic JSON, so that specs compare field by field.
func asMap(t *testing.T, v any) map[string]any {
	t.Helper()
	b, ok := v.([]byte)
	if !ok {
		var err error
		if b, err = json.Marshal(v); err != nil {
			t.Fatal(err)
		}
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestReaderPodSpec(t *testing.T) {
	for _, tc := range load(t).ReaderPod {
		t.Run(tc.Name, func(t *testing.T) {
			tmpl := tc.Template.DeepCopy()
			got := ReaderPodSpec(&tc.Template, tc.Claim, tc.Mount)
			if diff := cmp.Diff(asMap(t, []byte(tc.Want)), asMap(t, got)); diff != "" {
				t.Errorf("reader pod spec (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(asMap(t, tmpl), asMap(t, &tc.Template)); diff != "" {
				t.Errorf("the template changed (-before +after):\n%s", diff)
			}
		})
	}
}

func TestParseFind(t *testing.T) {
	for _, tc := range load(t).Find {
		t.Run(tc.Name, func(t *testing.T) {
			got, err := parseFind(tc.Output)
			if tc.Error != "" {
				if err == nil || !strings.Contains(err.Error(), tc.Error) {
					t.Fatalf("error %v, want one with %q", err, tc.Error)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.Want, got, cmpopts.EquateEmpty(), cmp.Comparer(func(a, b Object) bool {
				return a.Name == b.Name && a.Size == b.Size && a.LastModified.Equal(b.LastModified)
			})); diff != "" {
				t.Errorf("listing (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCheckpointsAreNotArtifacts(t *testing.T) {
	for name, want := range map[string]bool{
		"checkpoints/ckpt-000001-000000000/arrays.npz": true,
		"model.npz":              false,
		"logs/checkpoints/x.txt": false,
		"checkpoints.txt":        false,
	} {
		if got := IsCheckpoint(name); got != want {
			t.Errorf("IsCheckpoint(%q) = %v, want %v", name, got, want)
		}
	}
}
