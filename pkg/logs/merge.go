package logs

import (
	"sort"
	"strings"
	"time"
)

// Stream is one pod's log lines, each starting with the RFC 3339 time
// the kubelet adds (PodLogOptions.Timestamps).
type Stream struct {
	Label string
	Lines []string
}

// Line is a line of a merged log.
type Line struct {
	Label string
	// Raw is the line as the kubelet sent it, time first.
	Raw string
}

// Merge merges pod logs by their timestamps (stable: equal times keep
// the streams' order). Lines without a readable time keep their place
// after the previous line of their stream.
func Merge(streams []Stream) []Line {
	type item struct {
		t      time.Time
		stream int
		line   Line
	}
	var all []item
	for i, s := range streams {
		var last time.Time
		for _, raw := range s.Lines {
			if t, ok := Time(raw); ok {
				last = t
			}
			all = append(all, item{t: last, stream: i, line: Line{Label: s.Label, Raw: raw}})
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].t.Before(all[j].t) })
	out := make([]Line, len(all))
	for i, it := range all {
		out[i] = it.line
	}
	return out
}

// Time reads the kubelet timestamp that starts a log line.
func Time(raw string) (time.Time, bool) {
	ts, _, ok := strings.Cut(raw, " ")
	if !ok {
		ts = raw
	}
	t, err := time.Parse(time.RFC3339Nano, ts)
	return t, err == nil
}
