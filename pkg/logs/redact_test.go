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
