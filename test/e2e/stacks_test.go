//go:build e2e

package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mpijob/mpijob/pkg/cli"
	"github.com/mpijob/mpijob/pkg/stacks"
	"github.com/mpijob/mpijob/test/framework"
)

// hangProgram is a deliberate hang: every rank but the last waits in an
// allreduce for the last one, which waits in a recv nobody sends.
const hangProgram = `import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()


def wait_for_peer():
    return comm.recv(source=0, tag=99)


def step():
    comm.Allreduce(np.ones(4), np.empty(4), op=MPI.SUM)


print("rank", rank, "of", size, "starting", flush=True)
if rank == size - 1:
    wait_for_peer()
else:
    step()
`

// The stacks of a hung job: 4 ranks on 2 Workers, ranks 0-2 in
// comm.Allreduce, rank 3 in comm.recv, grouped and contrasted, taken as
// the tenant with the pod security the jobs have; the job keeps running.
// Another tenant, a typo and a finished job are refused.
func TestStacksOfAHungJob(t *testing.T) {
	t.Parallel()
	framework.Get(t)
	name := framework.UniqueName("stacks")
	b64 := base64.StdEncoding.EncodeToString([]byte(hangProgram))
	rankCmd := fmt.Sprintf(`echo %s | base64 -d > /tmp/hang.py && exec python3 /tmp/hang.py`, b64)
	expect(t, mpijob(t, "dev-a", "team-a", "create", name, "--workers", "2", "--slots-per-worker", "2", "--", "mpirun", "sh", "-c", rankCmd), 0, "created")
	t.Cleanup(func() { mpijob(t, "dev-a", "team-a", "delete", name, "--wait=false") })
	expect(t, mpijob(t, "dev-a", "team-a", "wait", name, "--for=Running", "--timeout", "3m"), 0)

	var last result
	var res stacks.Result
	waitFor(t, 3*time.Minute, "every rank's stack, in two groups, all in hang.py", func() (bool, string) {
		last = runCLI(t, "dev-a", "team-a", "stacks", name, "-o", "json")
		res = stacks.Result{}
		if last.code != 0 || json.Unmarshal([]byte(last.out), &res) != nil {
			return false, last.out + last.errOut
		}
		// Every rank in hang.py itself: on a loaded machine some ranks are
		// still importing numpy when the job is Running (seen: ranks 2-3 in
		// <frozen importlib._bootstrap>), which is also two groups.
		settled := len(res.Ranks) == 4 && len(res.Groups) == 2
		for _, g := range res.Groups {
			settled = settled && strings.Contains(g.Where, "hang.py:")
		}
		return settled, last.out
	})
	g := res.Groups
	if g[0].RankText != "0-2" || g[0].Callee != "comm.Allreduce" || !strings.Contains(g[0].Where, "hang.py:13 step()") {
		t.Errorf("ranks 0-2 wait in comm.Allreduce in step(): %+v", g[0])
	}
	if g[1].RankText != "3" || g[1].Callee != "comm.recv" || !strings.Contains(g[1].Where, "hang.py:9 wait_for_peer()") || g[1].Pods != "Worker 1" {
		t.Errorf("rank 3 waits in comm.recv on Worker 1: %+v", g[1])
	}
	if want := "rank 3 waits in comm.recv while ranks 0-2 wait in comm.Allreduce"; res.Contrast != want {
		t.Errorf("contrast %q, want %q", res.Contrast, want)
	}
	text := runCLI(t, "dev-a", "team-a", "stacks", name)
	t.Logf("stacks:\n%s", text.out)
	for _, want := range []string{"ranks 0-2 (3): comm.Allreduce ← hang.py:13 step() ← hang.py:20 <module>",
		"rank 3 on Worker 1: comm.recv ← hang.py:9 wait_for_peer() ← hang.py:18 <module>",
		"comm.Allreduce(np.ones(4), np.empty(4), op=MPI.SUM)", "Rank 3 waits in comm.recv while ranks 0-2 wait in comm.Allreduce."} {
		if !strings.Contains(text.out, want) {
			t.Errorf("stacks prints %q:\n%s", want, text.out)
		}
	}
	// Taking stacks ends nothing: the ranks still run and answer again.
	expect(t, mpijob(t, "dev-a", "team-a", "get", name), 0, "Running")
	expect(t, mpijob(t, "dev-a", "team-a", "stacks", name), 0, "ranks 0-2 (3)")
	// The dashboard's Stacks tab, as dev-a.
	ts, _ := dashboardServer(t)
	browserCheck(t, "stacks.mjs", ts.URL, "stacks tab checks", "JOB="+name)

	expect(t, mpijob(t, "dev-b", "team-b", "stacks", name), cli.ExitNotFound)
	expect(t, mpijob(t, "dev-a", "team-a", "stacks", name+"x"), cli.ExitNotFound, `did you mean "`+name+`"`)
	expect(t, mpijob(t, "dev-a", "team-a", "stacks", name, "-o", "yaml"), cli.ExitUsage, "stacks prints text, or json")
	expect(t, mpijob(t, "dev-a", "team-a", "delete", name), 0)
	expect(t, mpijob(t, "dev-a", "team-a", "stacks", name), cli.ExitNotFound)
}
