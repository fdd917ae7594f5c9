package api

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// stepVectors are pkg/api/testdata/steps.json, which the SDK and the
// dashboard test too.
type stepVectors struct {
	Vectors []struct {
		Name  string `json:"name"`
		Job   string `json:"job"`
		Step  Step   `json:"step"`
		Named Step   `json:"named"`
		CLI   string `json:"cli"`
	} `json:"vectors"`
}

func TestStepVectors(t *testing.T) {
	b, err := os.ReadFile("testdata/steps.json")
	if err != nil {
		t.Fatal(err)
	}
	var v stepVectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Vectors) < 10 {
		t.Fatalf("%d vectors, want the whole set", len(v.Vectors))
	}
	for _, tc := range v.Vectors {
		t.Run(tc.Name, func(t *testing.T) {
			got := tc.Step.Named(tc.Job)
			if diff := cmp.Diff(tc.Named, got); diff != "" {
				t.Errorf("Named(%q) (-want +got):\n%s", tc.Job, diff)
			}
			cli := ""
			if got.Command != nil {
				cli = got.Command.String()
			}
			if cli != tc.CLI {
				t.Errorf("command %q, want %q", cli, tc.CLI)
			}
			if tc.Step.Command != nil && tc.Step.Command.Args != nil && &tc.Step.Command.Args[0] == &got.Command.Args[0] {
				t.Error("Named shares the rule's arguments")
			}
		})
	}
}
