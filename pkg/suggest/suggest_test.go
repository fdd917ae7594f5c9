package suggest

import (
	"encoding/json"
	"os"
	"testing"
)

// The vectors the Python SDK's suggest.closest is tested with too.
func TestClosest(t *testing.T) {
	raw, err := os.ReadFile("testdata/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Vectors []struct {
			Name, Input, Want string
			Candidates        []string
		} `json:"vectors"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Vectors) < 8 {
		t.Fatalf("%d vectors", len(f.Vectors))
	}
	for _, tc := range f.Vectors {
		t.Run(tc.Name, func(t *testing.T) {
			if got := Closest(tc.Input, tc.Candidates); got != tc.Want {
				t.Errorf("Closest(%q, %q) = %q, want %q", tc.Input, tc.Candidates, got, tc.Want)
			}
		})
	}
}
