package logs

import (
	"bufio"
	"container/heap"
	"errors"
	"fmt"
	"io"
	"time"
)

// MaxLineBytes is the longest log line MergeReaders reads whole; a longer
// one ends its stream with a note.
const MaxLineBytes = 1 << 20

// Reader is one pod's log as it streams, each line starting with the
// kubelet's time (PodLogOptions.Timestamps).
type Reader struct {
	Label string
	R     io.Reader
}

// MergeReaders merges pod logs by their timestamps as Merge does (equal
// times keep the readers' order; a line without a time follows the
// previous line of its stream) while it reads them: it holds one line per
// reader, so merging ten 100 MiB logs costs a few buffers, not 1 GiB.
// emit gets the lines in order; an error from it stops the merge.
func MergeReaders(readers []Reader, emit func(Line) error) error {
	h := &heads{}
	for i, r := range readers {
		sc := bufio.NewScanner(r.R)
		sc.Buffer(make([]byte, 0, 64<<10), MaxLineBytes)
		s := &stream{index: i, label: r.Label, sc: sc}
		if s.next() {
			h.items = append(h.items, s)
		} else if err := s.err(); err != nil {
			if e := emit(Line{Label: r.Label, Text: err.Error()}); e != nil {
				return e
			}
		}
	}
	heap.Init(h)
	for h.Len() > 0 {
		s := h.items[0]
		if err := emit(s.line); err != nil {
			return err
		}
		if s.next() {
			heap.Fix(h, 0)
			continue
		}
		heap.Pop(h)
		if err := s.err(); err != nil {
			if e := emit(Line{Label: s.label, Text: err.Error()}); e != nil {
				return e
			}
		}
	}
	return nil
}

type stream struct {
	index int
	label string
	sc    *bufio.Scanner
	line  Line
	// t is the line's time, or the last time its stream gave.
	t time.Time
}

func (s *stream) next() bool {
	if !s.sc.Scan() {
		return false
	}
	s.line = NewLine(s.label, s.sc.Text())
	if s.line.Stamp != "" {
		s.t = s.line.Time
	}
	return true
}

func (s *stream) err() error {
	err := s.sc.Err()
	switch {
	case err == nil:
		return nil
	case errors.Is(err, bufio.ErrTooLong):
		return fmt.Errorf("(the rest of this log is not shown: a line is longer than %d MiB)", MaxLineBytes>>20)
	default:
		return fmt.Errorf("(the log stopped: %w)", err)
	}
}

// heads orders the streams by their current line's time, then by their
// order, as Merge's stable sort does.
type heads struct{ items []*stream }

func (h *heads) Len() int { return len(h.items) }
func (h *heads) Less(i, j int) bool {
	a, b := h.items[i], h.items[j]
	if !a.t.Equal(b.t) {
		return a.t.Before(b.t)
	}
	return a.index < b.index
}
func (h *heads) Swap(i, j int) { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *heads) Push(x any)    { h.items = append(h.items, x.(*stream)) }
func (h *heads) Pop() any {
	old := h.items
	x := old[len(old)-1]
	h.items = old[:len(old)-1]
	return x
}
