package stacks

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the want parts of testdata/vectors.json")

type vectorPod struct {
	Pod    Pod    `json:"pod"`
	Output string `json:"output"`
}

type vectorWant struct {
	Groups   []vectorGroup `json:"groups"`
	Contrast string        `json:"contrast"`
}

type vectorGroup struct {
	RankText string `json:"rankText"`
	Callee   string `json:"callee"`
	Where    string `json:"where"`
	Headline string `json:"headline"`
	States   string `json:"states"`
	Pods     string `json:"pods"`
}

type vector struct {
	Name string      `json:"name"`
	Pods []vectorPod `json:"pods"`
	Want vectorWant  `json:"want"`
}

type vectorFile struct {
	Comment string   `json:"comment"`
	Cases   []vector `json:"cases"`
}

func TestVectors(t *testing.T) {
	b, err := os.ReadFile("testdata/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var f vectorFile
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	for i, c := range f.Cases {
		t.Run(c.Name, func(t *testing.T) {
			var ranks []Rank
			for _, p := range c.Pods {
				ranks = append(ranks, RanksOf(p.Pod, Parse(p.Output))...)
			}
			groups := GroupRanks(ranks)
			got := vectorWant{Contrast: Contrast(groups), Groups: []vectorGroup{}}
			for _, g := range groups {
				got.Groups = append(got.Groups, vectorGroup{RankText: g.RankText, Callee: g.Callee, Where: g.Where, Headline: g.Headline, States: g.States, Pods: g.Pods})
			}
			if *update {
				f.Cases[i].Want = got
				return
			}
			if diff := cmp.Diff(c.Want, got); diff != "" {
				t.Errorf("groups (-want +got):\n%s", diff)
			}
		})
	}
	if *update {
		var out bytes.Buffer
		enc := json.NewEncoder(&out)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(f); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("testdata/vectors.json", out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCallee(t *testing.T) {
	cases := map[string]struct{ source, want string }{
		"a method call":            {"comm.Allreduce(sendbuf, recvbuf, op=MPI.SUM)", "comm.Allreduce"},
		"an assignment":            {"msg = comm.recv(source=0)", "comm.recv"},
		"under a builtin":          {"loss = float(comm.allreduce(x))", "comm.allreduce"},
		"a keyword before a paren": {"if (ready): time.sleep(1)", "time.sleep"},
		"no call":                  {"x = y + 1", ""},
		"a plain function":         {"step()", "step"},
		"spaces before the paren":  {"hvd.allreduce (t)", "hvd.allreduce"},
		"only builtins":            {"print(len(x))", ""},
		"a call in a return":       {"return torch.distributed.barrier()", "torch.distributed.barrier"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Callee(c.source); got != c.want {
				t.Errorf("Callee(%q) = %q, want %q", c.source, got, c.want)
			}
		})
	}
}

func TestParseKeepsEveryThreadAndSource(t *testing.T) {
	out := "@@process pid=7 ppid=1 rank=3 state=R cpu_ticks=42 hook=1 comm=python 3\n" +
		"Thread 0x00007f (most recent call first):\n" +
		"  File \"/a.py\", line 2 in run\n\n" +
		"Current thread 0x00008f (most recent call first):\n" +
		"  File \"/b.py\", line 9 in main\n" +
		"@@source /b.py:9\tmain_loop()\n@@end\n"
	want := []Process{{PID: 7, PPID: 1, Rank: 3, State: "R", CPUTicks: 42, Hook: true, Comm: "python 3", Threads: []Thread{
		{Frames: []Frame{{File: "/a.py", Line: 2, Func: "run"}}},
		{Current: true, Frames: []Frame{{File: "/b.py", Line: 9, Func: "main", Source: "main_loop()"}}},
	}}}
	if diff := cmp.Diff(want, Parse(out)); diff != "" {
		t.Errorf("Parse (-want +got):\n%s", diff)
	}
}
