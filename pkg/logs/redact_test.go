package logs

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The vectors are shared with the Python SDK's tests
// (sdk/python/tests/test_unit.py): both must give these answers.
func TestRedactionVectors(t *testing.T) {
	b, err := os.ReadFile("testdata/redact-vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var vectors []struct {
		Name, In, Want string
		Count          int
	}
	if err := json.Unmarshal(b, &vectors); err != nil {
		t.Fatal(err)
	}
	for _, v := range vectors {
		t.Run(v.Name, func(t *testing.T) {
			got, n := String(v.In)
			if diff := cmp.Diff(v.Want, got); diff != "" {
				t.Errorf("String (-want,+got):\n%s", diff)
			}
			if n != v.Count {
				t.Errorf("count = %d, want %d", n, v.Count)
			}
		})
	}
}

// The SDK ships the same rules file; any drift fails here and there.
func TestSDKShipsTheSameRules(t *testing.T) {
	sdk, err := os.ReadFile("../../sdk/python/mpijob/redact-rules.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sdk, RulesJSON) {
		t.Error("sdk/python/mpijob/redact-rules.json differs from pkg/logs/redact-rules.json: copy it (cp pkg/logs/redact-rules.json sdk/python/mpijob/)")
	}
}

// What the manager quotes in a status also hides bare hex tokens, which
// logs keep (a commit hash there is not a secret).
func TestQuoted(t *testing.T) {
	const key = "3f9c1a7e5b2d4c6e8a0b1d3f5e7a9c2b4d6f8e0a"
	for name, tc := range map[string]struct{ in, want string }{
		"a W&B key alone":         {"wandb login " + key, "wandb login " + Mask},
		"at the start, in quotes": {`"` + key + `" rejected`, `"` + Mask + `" rejected`},
		"two, side by side":       {key + " " + key, Mask + " " + Mask},
		"part of a word stays":    {"id_" + key, "id_" + key},
		"only digits stay":        {"12345678901234567890123456789012", "12345678901234567890123456789012"},
		"a short hash stays":      {"commit 4f2a9c1e", "commit 4f2a9c1e"},
		"the logs' rules apply":   {"password=hunter2", "password=" + Mask},
	} {
		t.Run(name, func(t *testing.T) {
			if got, _ := Quoted(tc.in); got != tc.want {
				t.Errorf("Quoted(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
	if got, _ := String("wandb login " + key); got != "wandb login "+key {
		t.Errorf("the logs' String masked a bare hex run: %q", got)
	}
}
