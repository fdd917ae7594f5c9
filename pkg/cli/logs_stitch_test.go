package cli

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// A live pod's log comes after what the store holds of the pod from before
// its first line; a pod whose log the kubelet serves empty (rotated away,
// or a stopping pod's container being removed) shows the store's lines,
// not nothing.
func TestStitch(t *testing.T) {
	const stored = "2026-11-24T06:00:00Z early\n"
	first := time.Date(2026, 11, 24, 6, 0, 1, 0, time.UTC)
	cases := map[string]struct {
		live       string
		store      error
		wantOut    string
		wantStored int
		wantEnd    time.Time
	}{
		"the store's lines before the first live one": {
			live: "2026-11-24T06:00:01Z late\n", wantOut: stored + "2026-11-24T06:00:01Z late\n", wantStored: 1, wantEnd: first,
		},
		"the kubelet serves nothing: the store's lines, all": {
			live: "", wantOut: stored, wantStored: 1,
		},
		"the kubelet serves nothing and the store fails: nothing, as before": {
			live: "", store: errors.New("down"), wantOut: "",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			st := &stitch{label: "launcher"}
			var end time.Time
			asked := false
			r := st.reader(strings.NewReader(tc.live), func(e time.Time) (io.Reader, error) {
				asked, end = true, e
				if tc.store != nil {
					return nil, tc.store
				}
				return strings.NewReader(stored), nil
			})
			b, err := io.ReadAll(r)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantOut, string(b)); diff != "" {
				t.Errorf("read (-want +got):\n%s", diff)
			}
			if st.stored != tc.wantStored {
				t.Errorf("stored = %d, want %d", st.stored, tc.wantStored)
			}
			if !asked || !end.Equal(tc.wantEnd) {
				t.Errorf("the store was asked %v, before %v; want before %v", asked, end, tc.wantEnd)
			}
		})
	}
}
