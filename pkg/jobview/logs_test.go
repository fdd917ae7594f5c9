package jobview

import (
	"encoding/json"
	"os"
	"testing"
)

// The vectors the SDK's get_logs is tested with too.
func TestLogFromVectors(t *testing.T) {
	raw, err := os.ReadFile("testdata/log-sources.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Vectors []struct {
			Name  string
			Where LogWhere
			From  LogSource
		}
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Vectors) < 8 {
		t.Fatalf("%d vectors", len(f.Vectors))
	}
	for _, tc := range f.Vectors {
		t.Run(tc.Name, func(t *testing.T) {
			if got := LogFrom(tc.Where); got != tc.From {
				t.Errorf("LogFrom(%+v) = %s, want %s", tc.Where, got, tc.From)
			}
		})
	}
}
