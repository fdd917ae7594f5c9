package artifacts

import (
	"encoding/json"
	"os"
	"testing"
)

func TestNameProblem(t *testing.T) {
	b, err := os.ReadFile("testdata/names.json")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Names []struct {
			Name    string `json:"name"`
			Problem string `json:"problem"`
		} `json:"names"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Names) == 0 {
		t.Fatal("no vectors")
	}
	for _, c := range v.Names {
		if got := NameProblem(c.Name); got != c.Problem {
			t.Errorf("NameProblem(%q) = %q, want %q", c.Name, got, c.Problem)
		}
	}
}
