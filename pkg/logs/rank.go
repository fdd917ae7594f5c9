package logs

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// rankTag is the tag mpirun puts before each line of a rank's output when
// the runtime asks it to (OpenMPI 4.1: [JOBID,RANK]<stdout>:TEXT; OpenMPI
// 5's --output tag adds a space after the colon, which stays part of the
// message: a line's own leading spaces are never taken).
var rankTag = regexp.MustCompile(`^\[\d+,(\d+)\]<(stdout|stderr|stddiag|stdio)>:`)

// Tagged is a line split at its rank tag.
type Tagged struct {
	Rank int
	// Stream is stdout or stderr (stddiag for MPI's own diagnostics;
	// stdio where Hydra tagged it, which does not tell the two apart).
	Stream string
	// Message is what the rank printed, exactly.
	Message string
}

// SplitRank reads the rank tag of a log line's text (time already cut);
// ok is false for a line without one (mpirun's own output, a runtime that
// does not tag).
func SplitRank(text string) (Tagged, bool) {
	m := rankTag.FindStringSubmatchIndex(text)
	if m == nil {
		return Tagged{}, false
	}
	r, err := strconv.Atoi(text[m[2]:m[3]])
	if err != nil {
		return Tagged{}, false
	}
	return Tagged{Rank: r, Stream: text[m[4]:m[5]], Message: text[m[1]:]}, true
}

// MaxSelection bounds a rank selection's size.
const MaxSelection = 65536

const selectionHelp = "give a rank number, a range like 0-3, or a list like 0,2,5-7"

// Selection is a set of ranks: 3, 0-3, 0,2,5-7.
type Selection map[int]bool

// ParseSelection reads a rank selection.
func ParseSelection(spec string) (Selection, error) {
	if strings.TrimSpace(spec) == "" {
		return nil, fmt.Errorf("%s", selectionHelp)
	}
	out := Selection{}
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, errA := strconv.Atoi(lo)
		b := a
		var errB error
		if isRange {
			b, errB = strconv.Atoi(hi)
		}
		if errA != nil || errB != nil || a < 0 || b < 0 {
			return nil, fmt.Errorf("%s: %s", part, selectionHelp)
		}
		if b < a {
			return nil, fmt.Errorf("%s: a range goes from low to high, e.g. %d-%d", part, b, a)
		}
		if b-a+1+len(out) > MaxSelection {
			return nil, fmt.Errorf("%s: at most %d ranks in a selection", part, MaxSelection)
		}
		for r := a; r <= b; r++ {
			out[r] = true
		}
	}
	return out, nil
}

// Ranks lists the selection in order.
func (s Selection) Ranks() []int {
	out := make([]int, 0, len(s))
	for r := range s {
		out = append(out, r)
	}
	sort.Ints(out)
	return out
}

// RanksText writes sorted ranks as a selection, the form ParseSelection
// reads: "0-6", "7", "0,2,5-7".
func RanksText(ranks []int) string {
	var parts []string
	for i := 0; i < len(ranks); {
		j := i
		for j+1 < len(ranks) && ranks[j+1] == ranks[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(ranks[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", ranks[i], ranks[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// Has reports whether a line's text (time cut) is from a selected rank.
func (s Selection) Has(text string) bool {
	t, ok := SplitRank(text)
	return ok && s[t.Rank]
}

// StripRanks removes the rank tag from every tagged line of log, leaving
// what each rank printed (and untagged lines) as they are: for rules that
// read a program's own output, such as a traceback.
func StripRanks(log string) string {
	if !strings.Contains(log, "]<std") {
		return log
	}
	lines := strings.Split(log, "\n")
	for i, l := range lines {
		if t, ok := SplitRank(l); ok {
			lines[i] = t.Message
		}
	}
	return strings.Join(lines, "\n")
}

// Shown is what a terminal shows of a line with carriage returns in it (a
// progress bar redrawn in place): its last non-empty part. The CLI prints
// that, since it drops the carriage returns a tenant could use to hide
// text behind other text.
func Shown(line string) string {
	if !strings.Contains(line, "\r") {
		return line
	}
	parts := strings.Split(line, "\r")
	for i := len(parts) - 1; i >= 0; i-- {
		if parts[i] != "" {
			return parts[i]
		}
	}
	return ""
}
