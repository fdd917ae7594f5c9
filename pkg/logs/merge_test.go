package logs

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The vectors the Python SDK's merge_logs is tested with too.
func TestMerge(t *testing.T) {
	raw, err := os.ReadFile("testdata/merge-vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Vectors []struct {
			Name    string
			Streams [][2]json.RawMessage
			Want    []string
		} `json:"vectors"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Vectors) < 4 {
		t.Fatalf("%d vectors", len(f.Vectors))
	}
	for _, tc := range f.Vectors {
		t.Run(tc.Name, func(t *testing.T) {
			var streams []Stream
			for _, s := range tc.Streams {
				var st Stream
				if err := json.Unmarshal(s[0], &st.Label); err != nil {
					t.Fatal(err)
				}
				if err := json.Unmarshal(s[1], &st.Lines); err != nil {
					t.Fatal(err)
				}
				streams = append(streams, st)
			}
			var got []string
			for _, l := range Merge(streams) {
				got = append(got, l.Label+" | "+l.Raw)
			}
			if diff := cmp.Diff(tc.Want, got); diff != "" {
				t.Errorf("Merge (-want,+got):\n%s", diff)
			}
		})
	}
}
