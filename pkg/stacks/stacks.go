// Package stacks is where a running job's ranks are: the collector that runs
// in each of its pods (collect.sh, as the user, with nothing the restricted
// pod security forbids), what it prints read back (Parse), one stack per
// rank (RanksOf), and identical stacks grouped (GroupRanks) into the lines every
// interface shows: "ranks 0-6 (7): comm.Allreduce ← train.py:120 step()".
// The SDK ships the same collector and follows the same rules, checked by
// the shared vectors in testdata/vectors.json. Pure: the exec is exec.go's.
package stacks

import (
	_ "embed"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/mpijob/mpijob/pkg/logs"
)

// Script is the collector, run with `sh -c` in a pod's node container.
//
//go:embed collect.sh
var Script string

// Frame is one Python frame.
type Frame struct {
	File string `json:"file"`
	Line int    `json:"line"`
	Func string `json:"func"`
	// Source is the frame's line of code, as the pod has the file.
	Source string `json:"source,omitempty"`
}

// String is "train.py:120 step()" ("train.py:200 <module>" for a module's
// own code).
func (f Frame) String() string {
	if strings.HasPrefix(f.Func, "<") {
		return fmt.Sprintf("%s:%d %s", path.Base(f.File), f.Line, f.Func)
	}
	return fmt.Sprintf("%s:%d %s()", path.Base(f.File), f.Line, f.Func)
}

// Thread is one thread's frames, innermost first.
type Thread struct {
	Current bool    `json:"current,omitempty"`
	Frames  []Frame `json:"frames"`
}

// Process is one MPI rank's process as the collector saw it.
type Process struct {
	PID      int    `json:"pid"`
	PPID     int    `json:"ppid"`
	Rank     int    `json:"rank"`
	State    string `json:"state"`
	CPUTicks int64  `json:"cpuTicks"`
	// Hook says the process runs mpijob's stack hook and dumped its
	// threads; a process without it (a C program, a Python of an image
	// without the hook) has its state only.
	Hook    bool     `json:"hook"`
	Comm    string   `json:"comm"`
	Threads []Thread `json:"threads,omitempty"`
}

var (
	processLine = regexp.MustCompile(`^@@process pid=(\d+) ppid=(\d+) rank=(\d+) state=(\S+) cpu_ticks=(\d+) hook=([01]) comm=(.*)$`)
	threadLine  = regexp.MustCompile(`^(Current thread|Thread) 0x[0-9a-f]+ \(most recent call first\):$`)
	frameLine   = regexp.MustCompile(`^  File "(.*)", line (\d+) in (.*)$`)
	sourceLine  = regexp.MustCompile(`^@@source (.*):(\d+)\t(.*)$`)
)

// Parse reads the collector's output; lines it does not know are skipped.
func Parse(out string) []Process {
	var procs []Process
	var cur *Process
	sources := map[string]string{}
	finish := func() {
		if cur == nil {
			return
		}
		for t := range cur.Threads {
			for f := range cur.Threads[t].Frames {
				fr := &cur.Threads[t].Frames[f]
				fr.Source = sources[fr.File+":"+strconv.Itoa(fr.Line)]
			}
		}
		procs = append(procs, *cur)
		cur, sources = nil, map[string]string{}
	}
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimRight(line, "\r")
		if m := processLine.FindStringSubmatch(line); m != nil {
			finish()
			cur = &Process{Rank: atoi(m[3]), PID: atoi(m[1]), PPID: atoi(m[2]), State: m[4], Hook: m[6] == "1", Comm: m[7]}
			cur.CPUTicks, _ = strconv.ParseInt(m[5], 10, 64)
			continue
		}
		if cur == nil {
			continue
		}
		switch {
		case line == "@@end":
			finish()
		case threadLine.MatchString(line):
			cur.Threads = append(cur.Threads, Thread{Current: strings.HasPrefix(line, "Current")})
		case frameLine.MatchString(line):
			m := frameLine.FindStringSubmatch(line)
			if len(cur.Threads) == 0 {
				cur.Threads = append(cur.Threads, Thread{})
			}
			t := &cur.Threads[len(cur.Threads)-1]
			t.Frames = append(t.Frames, Frame{File: m[1], Line: atoi(m[2]), Func: m[3]})
		case sourceLine.MatchString(line):
			m := sourceLine.FindStringSubmatch(line)
			sources[m[1]+":"+m[2]] = m[3]
		}
	}
	finish()
	return procs
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

// Pod is a pod the collector ran in.
type Pod struct {
	Name string `json:"name"`
	// Worker is the Worker's index; -1 for the Launcher.
	Worker int    `json:"worker"`
	Node   string `json:"node,omitempty"`
}

// Where is "Worker 3" or "the Launcher".
func (p Pod) Where() string {
	if p.Worker < 0 {
		return "the Launcher"
	}
	return fmt.Sprintf("Worker %d", p.Worker)
}

// Rank is one rank's stack: the frames of its main thread.
type Rank struct {
	Rank int `json:"rank"`
	Pod  Pod `json:"pod"`
	// State is the kernel's word for the process now: running, sleeping,
	// waiting on disk, stopped.
	State string `json:"state"`
	Hook  bool   `json:"hook"`
	Comm  string `json:"comm"`
	// Frames are the main thread's, innermost first; Threads counts the
	// Python threads the process has.
	Frames  []Frame `json:"frames,omitempty"`
	Threads int     `json:"threads,omitempty"`
}

// stateWords are /proc/PID/stat's states in words.
var stateWords = map[string]string{
	"R": "running", "S": "sleeping", "D": "waiting on disk", "T": "stopped", "t": "stopped", "Z": "exited", "I": "idle",
}

// RanksOf is one Rank per rank of the processes a pod's collector saw:
// for a rank with several processes (a shell that started Python, a
// Python that started another), the outermost one with the hook, else the
// outermost one.
func RanksOf(pod Pod, procs []Process) []Rank {
	byRank := map[int][]Process{}
	for _, p := range procs {
		byRank[p.Rank] = append(byRank[p.Rank], p)
	}
	var out []Rank
	for r, ps := range byRank {
		pick := outermost(ps, true)
		if pick == nil {
			pick = outermost(ps, false)
		}
		rk := Rank{Rank: r, Pod: pod, State: stateWords[pick.State], Hook: pick.Hook, Comm: pick.Comm, Threads: len(pick.Threads)}
		if rk.State == "" {
			rk.State = pick.State
		}
		if pick.Hook {
			rk.Frames = mainThread(pick.Threads)
		}
		out = append(out, rk)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Rank < out[j].Rank })
	return out
}

// outermost is the process of ps (one rank's) whose parent is not among
// ps; only those with the hook when hooked.
func outermost(ps []Process, hooked bool) *Process {
	pids := map[int]bool{}
	for _, p := range ps {
		if !hooked || p.Hook {
			pids[p.PID] = true
		}
	}
	var best *Process
	for i := range ps {
		p := &ps[i]
		if hooked && !p.Hook {
			continue
		}
		if !pids[p.PPID] && (best == nil || p.PID < best.PID) {
			best = p
		}
	}
	return best
}

// mainThread is the thread that runs the program: the one whose
// outermost frame is a module's (threads started by threading begin in
// its _bootstrap), else the one that took the signal, else the first.
func mainThread(ts []Thread) []Frame {
	for _, t := range ts {
		if n := len(t.Frames); n > 0 && t.Frames[n-1].Func == "<module>" {
			return t.Frames
		}
	}
	for _, t := range ts {
		if t.Current {
			return t.Frames
		}
	}
	if len(ts) > 0 {
		return ts[0].Frames
	}
	return nil
}

// callPattern finds calls in a line of Python: a dotted name, then "(".
var callPattern = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*\s*\(`)

// notCallees are the names before a "(" that say nothing of where a rank
// waits: keywords, and builtins that wrap the call that does.
var notCallees = map[string]bool{
	"if": true, "elif": true, "while": true, "for": true, "return": true, "and": true, "or": true, "not": true,
	"in": true, "is": true, "lambda": true, "yield": true, "await": true, "assert": true, "del": true, "with": true,
	"print": true, "float": true, "int": true, "str": true, "bool": true, "len": true, "list": true, "tuple": true,
	"dict": true, "set": true, "sum": true, "max": true, "min": true, "abs": true, "round": true, "repr": true, "sorted": true,
}

// Callee is the call a line of Python makes, as written ("comm.Allreduce"
// in "loss = float(comm.Allreduce(x, y))"): the first dotted name before a
// "(" that is not a keyword or a wrapping builtin; "" when there is none.
func Callee(source string) string {
	for _, m := range callPattern.FindAllString(source, -1) {
		name := strings.TrimRight(strings.TrimSuffix(strings.TrimSpace(m), "("), " \t")
		if !notCallees[name] {
			return name
		}
	}
	return ""
}

// Group is ranks with the same stack.
type Group struct {
	Ranks []int `json:"ranks"`
	// RankText is the ranks as a selection: "0-6", "7", "0,2,5-7".
	RankText string `json:"rankText"`
	// Callee is the call the innermost frame makes ("comm.Allreduce").
	Callee string `json:"callee,omitempty"`
	// Where is the innermost frame ("train.py:120 step()").
	Where string `json:"where,omitempty"`
	// Headline is the group in a line: "ranks 0-6 (7): comm.Allreduce ←
	// train.py:120 step()", "rank 7 on Worker 3: ...".
	Headline string  `json:"headline"`
	Frames   []Frame `json:"frames,omitempty"`
	// States are the ranks' states in words ("running", "sleeping 1,
	// running 6").
	States string `json:"states"`
	// Pods are where the ranks run ("Worker 0", "Workers 0-1").
	Pods string `json:"pods"`
	// Nodes are the nodes of those pods.
	Nodes []string `json:"nodes,omitempty"`
}

// key is what makes two ranks' stacks the same: every frame's place, or
// for a rank without a Python stack, its program and state.
func key(r Rank) string {
	if !r.Hook || len(r.Frames) == 0 {
		return "\x00" + r.Comm + "\x00" + fmt.Sprint(r.Hook)
	}
	var b strings.Builder
	for _, f := range r.Frames {
		fmt.Fprintf(&b, "%s:%d:%s\n", f.File, f.Line, f.Func)
	}
	return b.String()
}

// GroupRanks groups ranks with identical stacks, the largest group first (then
// by lowest rank).
func GroupRanks(ranks []Rank) []Group {
	byKey := map[string][]Rank{}
	var order []string
	for _, r := range ranks {
		k := key(r)
		if _, ok := byKey[k]; !ok {
			order = append(order, k)
		}
		byKey[k] = append(byKey[k], r)
	}
	var out []Group
	for _, k := range order {
		rs := byKey[k]
		sort.Slice(rs, func(i, j int) bool { return rs[i].Rank < rs[j].Rank })
		g := Group{Frames: rs[0].Frames}
		states := map[string]int{}
		workers := map[int]bool{}
		nodes := map[string]bool{}
		for _, r := range rs {
			g.Ranks = append(g.Ranks, r.Rank)
			states[r.State]++
			workers[r.Pod.Worker] = true
			if r.Pod.Node != "" {
				nodes[r.Pod.Node] = true
			}
		}
		g.RankText = logs.RanksText(g.Ranks)
		g.States = countWords(states)
		g.Pods = podsText(workers)
		for n := range nodes {
			g.Nodes = append(g.Nodes, n)
		}
		sort.Strings(g.Nodes)
		var what string
		if len(g.Frames) > 0 {
			g.Where = g.Frames[0].String()
			g.Callee = Callee(g.Frames[0].Source)
			what = g.Where
			if g.Callee != "" {
				what = g.Callee + " ← " + g.Where
			}
			if len(g.Frames) > 1 {
				what += " ← " + g.Frames[1].String()
			}
		} else if rs[0].Hook {
			what = fmt.Sprintf("no Python frames (%s, %s)", rs[0].Comm, g.States)
		} else {
			what = fmt.Sprintf("no Python stack: %s runs without mpijob's stack hook (%s)", rs[0].Comm, g.States)
		}
		if len(rs) == 1 {
			g.Headline = fmt.Sprintf("rank %d on %s: %s", rs[0].Rank, rs[0].Pod.Where(), what)
		} else {
			g.Headline = fmt.Sprintf("ranks %s (%d): %s", g.RankText, len(rs), what)
		}
		out = append(out, g)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if len(out[i].Ranks) != len(out[j].Ranks) {
			return len(out[i].Ranks) > len(out[j].Ranks)
		}
		return out[i].Ranks[0] < out[j].Ranks[0]
	})
	return out
}

// Contrast says in a sentence how the groups differ, the largest last:
// "rank 7 waits in comm.recv while ranks 0-6 wait in comm.Allreduce"; ""
// for one group or none.
func Contrast(groups []Group) string {
	if len(groups) < 2 {
		return ""
	}
	var parts []string
	for _, g := range groups[1:] {
		parts = append(parts, ranksWait(g))
	}
	return strings.Join(parts, ", ") + " while " + ranksWait(groups[0])
}

func ranksWait(g Group) string {
	where := g.Callee
	if where == "" {
		where = g.Where
	}
	if where == "" {
		return fmt.Sprintf("%s %s no Python stack", ranksWord(g), has(g))
	}
	return fmt.Sprintf("%s %s in %s", ranksWord(g), wait(g), where)
}

func ranksWord(g Group) string {
	if len(g.Ranks) == 1 {
		return "rank " + g.RankText
	}
	return "ranks " + g.RankText
}

func wait(g Group) string {
	if len(g.Ranks) == 1 {
		return "waits"
	}
	return "wait"
}

func has(g Group) string {
	if len(g.Ranks) == 1 {
		return "has"
	}
	return "have"
}

// podsText is "the Launcher", "Worker 3", "Workers 0-1", "the Launcher and
// Workers 0-1".
func podsText(workers map[int]bool) string {
	var idx []int
	launcher := false
	for w := range workers {
		if w < 0 {
			launcher = true
			continue
		}
		idx = append(idx, w)
	}
	sort.Ints(idx)
	var parts []string
	if launcher {
		parts = append(parts, "the Launcher")
	}
	switch len(idx) {
	case 0:
	case 1:
		parts = append(parts, "Worker "+strconv.Itoa(idx[0]))
	default:
		parts = append(parts, "Workers "+logs.RanksText(idx))
	}
	return strings.Join(parts, " and ")
}

// countWords is "running" when all agree, else "running 6, sleeping 1"
// (most first, then by word).
func countWords(m map[string]int) string {
	if len(m) == 1 {
		for w := range m {
			return w
		}
	}
	type wc struct {
		w string
		n int
	}
	var l []wc
	for w, n := range m {
		l = append(l, wc{w, n})
	}
	sort.Slice(l, func(i, j int) bool {
		if l[i].n != l[j].n {
			return l[i].n > l[j].n
		}
		return l[i].w < l[j].w
	})
	var parts []string
	for _, x := range l {
		parts = append(parts, fmt.Sprintf("%s %d", x.w, x.n))
	}
	return strings.Join(parts, ", ")
}
