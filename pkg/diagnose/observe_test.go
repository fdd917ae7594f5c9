package diagnose

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mpijob/mpijob/pkg/progress"
)

// One read of a Launcher's log holds every fact its readers take: the
// last progress report, a failed rank, a silent rank, the last line with
// its time, and the lines without their timestamps for the diagnosis's
// rules.
func TestObserve(t *testing.T) {
	log := `2026-11-23T10:00:00Z [1,0]<stdout>:MPIJOB_PROGRESS {"epoch": 1, "total_epochs": 4, "loss": 0.9}
2026-11-23T10:00:01Z [1,1]<stdout>:epoch 1 done
2026-11-23T10:00:02Z [1,1]<stderr>:Traceback (most recent call last):
2026-11-23T10:00:02Z [1,1]<stderr>:RuntimeError: boom
2026-11-23T10:09:00Z [1,0]<stdout>:MPIJOB_PROGRESS {"epoch": 2, "total_epochs": 4, "loss": 0.5}
2026-11-23T10:09:30Z [1,0]<stdout>:waiting for rank 1
`
	now := time.Date(2026, 11, 23, 10, 10, 0, 0, time.UTC)
	o := Observe(log, now, 5*time.Minute)
	if o.Progress == nil || o.Progress.Epoch == nil || *o.Progress.Epoch != 2 || !o.Progress.Time.Equal(time.Date(2026, 11, 23, 10, 9, 0, 0, time.UTC)) {
		t.Errorf("progress %+v, want the last report (epoch 2) at its line's time, 10:09:00", o.Progress)
	}
	// The one parse of the lines finds what progress.Last finds in the log.
	if want, _ := progress.Last(log); o.Progress == nil || !cmp.Equal(want, *o.Progress) {
		t.Errorf("progress %+v, progress.Last %+v", o.Progress, want)
	}
	// A report on a line without the kubelet's time has none.
	if o := Observe(`MPIJOB_PROGRESS {"step": 3, "total_steps": 9}`+"\n", now, 0); o.Progress == nil || *o.Progress.Step != 3 || !o.Progress.Time.IsZero() {
		t.Errorf("an untimed report: %+v", o.Progress)
	}
	if o.RankFailure == nil || *o.RankFailure.Rank != 1 || o.RankFailure.Error != "RuntimeError: boom" {
		t.Errorf("rank failure %+v, want rank 1's RuntimeError", o.RankFailure)
	}
	if o.Silent == nil || *o.Silent.Rank != 1 || !o.Silent.Silent {
		t.Errorf("silent %+v, want rank 1: nothing for 8 minutes while rank 0 prints", o.Silent)
	}
	if o.LastLine != "[1,0]<stdout>:waiting for rank 1" || o.LastAt == nil || !o.LastAt.Equal(time.Date(2026, 11, 23, 10, 9, 30, 0, time.UTC)) {
		t.Errorf("last line %q at %v", o.LastLine, o.LastAt)
	}
	if strings.Contains(o.Tail, "2026-11-23T") || !strings.HasPrefix(o.Tail, "[1,0]<stdout>:MPIJOB_PROGRESS") || strings.Count(o.Tail, "\n") != 6 {
		t.Errorf("tail without timestamps:\n%s", o.Tail)
	}
	if !o.PrintedSince(0, time.Date(2026, 11, 23, 10, 9, 0, 0, time.UTC)) || o.PrintedSince(1, time.Date(2026, 11, 23, 10, 5, 0, 0, time.UTC)) {
		t.Error("PrintedSince: rank 0 printed at 10:09:30, rank 1 not since 10:00:02")
	}
	if o := Observe(log, now, 0); o.Silent != nil {
		t.Errorf("no progress timeout, yet a silent rank: %+v", o.Silent)
	}
	if o := Observe("", now, time.Minute); o.Progress != nil || o.RankFailure != nil || o.Silent != nil || o.LastAt != nil || o.Tail != "" {
		t.Errorf("an empty log: %+v", o)
	}
	// A line without the kubelet's time has no time to judge by.
	if o := Observe("no time here\n", now, time.Minute); o.LastAt != nil || o.LastLine != "" || o.Tail != "no time here\n" {
		t.Errorf("a line without a timestamp: %+v", o)
	}
}
