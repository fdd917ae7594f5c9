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
	// Stamp is Raw's leading timestamp ("" when it has none) and Text the
	// rest; Time is Stamp read.
	Stamp, Text string
	Time        time.Time
}

// NewLine splits a kubelet log line into its time and text, once.
func NewLine(label, raw string) Line {
	l := Line{Label: label, Raw: raw, Text: raw}
	if ts, rest, ok := strings.Cut(raw, " "); ok {
		if t, err := time.Parse(time.RFC3339Nano, ts); err == nil {
			l.Stamp, l.Text, l.Time = ts, rest, t
		}
	}
	return l
}

// Merge merges pod logs by their timestamps (stable: equal times keep
// the streams' order). Lines without a readable time keep their place
// after the previous line of their stream.
func Merge(streams []Stream) []Line {
	type item struct {
		t    time.Time
		line Line
	}
	var all []item
	for _, s := range streams {
		var last time.Time
		for _, raw := range s.Lines {
			l := NewLine(s.Label, raw)
			if l.Stamp != "" {
				last = l.Time
			}
			all = append(all, item{t: last, line: l})
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].t.Before(all[j].t) })
	out := make([]Line, len(all))
	for i, it := range all {
		out[i] = it.line
	}
	return out
}
