package logs

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMerge(t *testing.T) {
	got := Merge([]Stream{
		{Label: "launcher", Lines: []string{"2026-11-22T10:00:00.100Z start", "2026-11-22T10:00:00.400Z rank 0 done", "continued"}},
		{Label: "worker-0", Lines: []string{"2026-11-22T10:00:00.200Z sshd up", "2026-11-22T10:00:00.400Z same time as launcher"}},
		{Label: "worker-1", Lines: []string{"2026-11-22T10:00:00.050Z first"}},
	})
	var lines []string
	for _, l := range got {
		lines = append(lines, l.Label+" | "+l.Raw)
	}
	want := []string{
		"worker-1 | 2026-11-22T10:00:00.050Z first",
		"launcher | 2026-11-22T10:00:00.100Z start",
		"worker-0 | 2026-11-22T10:00:00.200Z sshd up",
		"launcher | 2026-11-22T10:00:00.400Z rank 0 done",
		// A line without a time stays after its stream's previous line.
		"launcher | continued",
		"worker-0 | 2026-11-22T10:00:00.400Z same time as launcher",
	}
	if diff := cmp.Diff(want, lines); diff != "" {
		t.Errorf("Merge (-want,+got):\n%s", diff)
	}
}
