package logs

import (
	"encoding/json"
	"os"
	"strings"
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
			// The streaming merge gives the same lines in the same order.
			var readers []Reader
			for _, st := range streams {
				text := strings.Join(st.Lines, "\n")
				readers = append(readers, Reader{Label: st.Label, R: strings.NewReader(text)})
			}
			var streamed []string
			if err := MergeReaders(readers, func(l Line) error {
				streamed = append(streamed, l.Label+" | "+l.Raw)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.Want, streamed); diff != "" {
				t.Errorf("MergeReaders (-want,+got):\n%s", diff)
			}
		})
	}
}

// A line longer than MaxLineBytes ends its stream with a note; the other
// streams go on.
func TestMergeReadersLongLine(t *testing.T) {
	long := "2026-11-22T10:00:01Z w-first\n2026-11-22T10:00:01Z " + strings.Repeat("x", MaxLineBytes+1) + "\n2026-11-22T10:00:03Z after"
	var got []string
	err := MergeReaders([]Reader{
		{Label: "launcher", R: strings.NewReader("2026-11-22T10:00:00Z first\n2026-11-22T10:00:02Z second")},
		{Label: "worker-0", R: strings.NewReader(long)},
	}, func(l Line) error {
		got = append(got, l.Label+" | "+l.Text)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"launcher | first", "worker-0 | w-first", "worker-0 | (the rest of this log is not shown: a line is longer than 1 MiB)", "launcher | second"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("MergeReaders (-want,+got):\n%s", diff)
	}
}
