package logstore

import (
	"errors"
	"strings"
	"time"
)

// CRILine is one line of a kubelet's container log file (the CRI format:
// TIME STREAM P|F MESSAGE; P marks a part of a longer line).
type CRILine struct {
	Time    time.Time
	Stream  string
	Partial bool
	Message string
}

// ParseCRI reads one CRI log line (without its newline).
func ParseCRI(s string) (CRILine, error) {
	ts, rest, ok := strings.Cut(s, " ")
	if !ok {
		return CRILine{}, errors.New("no time")
	}
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return CRILine{}, err
	}
	stream, rest, ok := strings.Cut(rest, " ")
	if !ok || (stream != "stdout" && stream != "stderr") {
		return CRILine{}, errors.New("no stream")
	}
	flag, msg, ok := strings.Cut(rest, " ")
	if !ok {
		// An empty message: "TIME stdout F".
		flag, msg = rest, ""
	}
	if flag != "P" && flag != "F" && !strings.HasPrefix(flag, "F:") && !strings.HasPrefix(flag, "P:") {
		return CRILine{}, errors.New("no tag")
	}
	return CRILine{Time: t, Stream: stream, Partial: flag[0] == 'P', Message: msg}, nil
}
