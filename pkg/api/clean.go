package api

import (
	"bytes"
	"io"
	"regexp"
	"strings"
)

// Terminal escape sequences (ANSI CSI such as colours and cursor moves,
// and OSC such as window titles or hyperlinks), then every other control
// character but newline and tab, and the Unicode direction overrides that
// make text read differently from what it is.
var (
	escapeSeqRe = regexp.MustCompile(`\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?`)
	controlRe   = regexp.MustCompile(`[\x00-\x08\x0b-\x1f\x{7f}-\x{9f}\x{202a}-\x{202e}\x{2066}-\x{2069}]`)
)

// CleanText removes what a terminal or a browser would act on rather than
// show from text that came from the cluster: a TrainJob's status is
// printed by the CLI, the SDK and the dashboard, and must not be able to
// recolour a terminal, move its cursor or hide a command. The SDK has the
// same rule, checked by the vectors in testdata/clean-text.json.
func CleanText(s string) string {
	if !strings.ContainsFunc(s, isSuspect) {
		return s
	}
	return controlRe.ReplaceAllString(escapeSeqRe.ReplaceAllString(s, ""), "")
}

func isSuspect(r rune) bool {
	return (r < 0x20 && r != '\n' && r != '\t') || (r >= 0x7f && r <= 0x9f) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}

// Clean is s with CleanText applied to every text it holds.
func (s Status) Clean() Status {
	s.Phase = Phase(CleanText(string(s.Phase)))
	s.Launcher = LauncherState(CleanText(string(s.Launcher)))
	s.Reason = CleanText(s.Reason)
	s.GPUsPerWorker = CleanText(s.GPUsPerWorker)
	s.Runtime = CleanText(s.Runtime)
	// The names too: a status annotation written by hand can hold anything.
	s.Pods = mapped(s.Pods, func(p PodRecord) PodRecord {
		p.Role, p.Pod, p.Node = CleanText(p.Role), CleanText(p.Pod), CleanText(p.Node)
		return p
	})
	s.Failed = mapped(s.Failed, func(p FailedPod) FailedPod {
		p.Role, p.Pod, p.Node = CleanText(p.Role), CleanText(p.Pod), CleanText(p.Node)
		return p
	})
	return s.MapProse(CleanText)
}

// MapProse is s with f applied to its prose, the texts that quote what a
// job's pods said: Message, NextStep, each of NextSteps and of Steps (its
// command's words too), the transitions'
// messages, the pods' states and the failed pods' reasons.
func (s Status) MapProse(f func(string) string) Status {
	s.Message, s.NextStep = f(s.Message), f(s.NextStep)
	s.NextSteps = mapped(s.NextSteps, f)
	s.Steps = mapped(s.Steps, func(st Step) Step {
		st.Text = f(st.Text)
		if st.Command != nil {
			st.Command = &Command{Verb: f(st.Command.Verb), Args: mapped(st.Command.Args, f)}
		}
		return st
	})
	s.History = mapped(s.History, func(t Transition) Transition { t.Message = f(t.Message); return t })
	s.Pods = mapped(s.Pods, func(p PodRecord) PodRecord { p.State = f(p.State); return p })
	s.Failed = mapped(s.Failed, func(p FailedPod) FailedPod { p.Reason = f(p.Reason); return p })
	return s
}

// mapped is a new slice of f of each of xs (nil stays nil): a Status's
// slices are shared with its copies, so they are never changed in place.
func mapped[T any](xs []T, f func(T) T) []T {
	if xs == nil {
		return nil
	}
	out := make([]T, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

// CleanWriter writes through to w with CleanText applied to each write:
// what a verb prints (a tenant's Event, an env value, a status) cannot act
// on the terminal. A sequence split across two writes loses its ESC,
// which is all it needs to stay inert.
func CleanWriter(w io.Writer) io.Writer { return cleanWriter{w} }

type cleanWriter struct{ w io.Writer }

func (c cleanWriter) Write(p []byte) (int, error) {
	if !bytes.ContainsFunc(p, isSuspect) {
		return c.w.Write(p)
	}
	if _, err := io.WriteString(c.w, CleanText(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}
