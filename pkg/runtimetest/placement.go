package runtimetest

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// helloLine is the placement line every rank of the images' programs
// prints (mpi-hello, the examples): "rank R of N on HOST", anywhere in a line.
// Any program can print it to have its placement checked.
var helloLine = regexp.MustCompile(`\brank (\d+) of (\d+) on (\S+)`)

// Placement is where a job's ranks ran, read from mpi-hello's output.
type Placement struct {
	// Size is the world size the ranks reported.
	Size int
	// Hosts maps each rank to the host it ran on.
	Hosts map[int]string
}

// ParsePlacement reads the ranks' placement lines from a Launcher log. Lines may
// carry a prefix (a rank tag, a timestamp).
func ParsePlacement(log string) Placement {
	p := Placement{Hosts: map[int]string{}}
	for _, m := range helloLine.FindAllStringSubmatch(log, -1) {
		r, _ := strconv.Atoi(m[1])
		n, _ := strconv.Atoi(m[2])
		p.Size = n
		// A host name may be a full DNS name: its first label is the pod's.
		p.Hosts[r] = strings.SplitN(m[3], ".", 2)[0]
	}
	return p
}

// Check says whether the ranks ran as an MPI job should: every one of the
// slots × Workers ranks reported, each Worker hosts exactly slots ranks, and
// none ran on the Launcher or anywhere else. workers and launcher are the
// pods' host names.
func (p Placement) Check(workers []string, launcher string, slots int) error {
	want := slots * len(workers)
	if len(p.Hosts) == 0 {
		return fmt.Errorf("no rank reported where it ran (no \"rank R of N on HOST\" line in the Launcher's log)")
	}
	per := map[string][]int{}
	for r, h := range p.Hosts {
		per[h] = append(per[h], r)
	}
	// Ranks on the Launcher first: it is the cause, a wrong world size its
	// consequence.
	if rs := per[launcher]; len(rs) > 0 {
		slices.Sort(rs)
		return fmt.Errorf("%d of %d ranks ran on the Launcher %s (ranks %v), not on the Workers: the MPI launcher did not read Trainer's hostfile", len(rs), p.Size, launcher, rs)
	}
	if p.Size != want {
		return fmt.Errorf("the ranks report a world of %d, want %d (%d Workers × %d slots)", p.Size, want, len(workers), slots)
	}
	var missing []string
	for r := range want {
		if _, ok := p.Hosts[r]; !ok {
			missing = append(missing, strconv.Itoa(r))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("ranks %s did not report", strings.Join(missing, ", "))
	}
	for h, rs := range per {
		if !slices.Contains(workers, h) {
			slices.Sort(rs)
			return fmt.Errorf("ranks %v ran on %s, which is not a Worker of this job (%s)", rs, h, strings.Join(workers, ", "))
		}
	}
	for _, w := range workers {
		if got := len(per[w]); got != slots {
			return fmt.Errorf("the Worker %s hosts %d ranks, want %d (one per slot)", w, got, slots)
		}
	}
	return nil
}
