package runtimetest

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParsePlacement(t *testing.T) {
	log := strings.Join([]string{
		"[1,0]<stdout>:mpi-hello: rank 0 of 4 on job-node-0-0.job.ns.svc.cluster.local",
		"mpi-hello: rank 1 of 4 on job-node-0-0",
		"[2] mpi-hello: rank 2 of 4 on job-node-0-1",
		"something else",
		"mpi-hello: rank 3 of 4 on job-node-0-1",
		"mpi-hello: allreduce over 4 ranks ok (sum 6)",
	}, "\n")
	want := Placement{Size: 4, Hosts: map[int]string{0: "job-node-0-0", 1: "job-node-0-0", 2: "job-node-0-1", 3: "job-node-0-1"}}
	if diff := cmp.Diff(want, ParsePlacement(log)); diff != "" {
		t.Errorf("ParsePlacement (-want,+got):\n%s", diff)
	}
}

func TestPlacementCheck(t *testing.T) {
	workers := []string{"j-node-0-0", "j-node-0-1"}
	cases := map[string]struct {
		log     string
		wantErr string
	}{
		"two ranks on each Worker": {
			log: "mpi-hello: rank 0 of 4 on j-node-0-0\nmpi-hello: rank 1 of 4 on j-node-0-0\nmpi-hello: rank 2 of 4 on j-node-0-1\nmpi-hello: rank 3 of 4 on j-node-0-1\n",
		},
		"every rank on the Launcher (OpenMPI 5 without a hostfile)": {
			log:     "mpi-hello: rank 0 of 4 on j-launcher-0-0\nmpi-hello: rank 1 of 4 on j-launcher-0-0\nmpi-hello: rank 2 of 4 on j-launcher-0-0\nmpi-hello: rank 3 of 4 on j-launcher-0-0\n",
			wantErr: "4 of 4 ranks ran on the Launcher j-launcher-0-0 (ranks [0 1 2 3])",
		},
		"all ranks on one Worker": {
			log:     "mpi-hello: rank 0 of 4 on j-node-0-0\nmpi-hello: rank 1 of 4 on j-node-0-0\nmpi-hello: rank 2 of 4 on j-node-0-0\nmpi-hello: rank 3 of 4 on j-node-0-0\n",
			wantErr: "the Worker j-node-0-0 hosts 4 ranks, want 2",
		},
		"a rank missing": {
			log:     "mpi-hello: rank 0 of 4 on j-node-0-0\nmpi-hello: rank 1 of 4 on j-node-0-0\nmpi-hello: rank 3 of 4 on j-node-0-1\n",
			wantErr: "ranks 2 did not report",
		},
		"wrong world size": {
			log:     "mpi-hello: rank 0 of 2 on j-node-0-0\nmpi-hello: rank 1 of 2 on j-node-0-1\n",
			wantErr: "world of 2, want 4",
		},
		"a stranger host": {
			log:     "mpi-hello: rank 0 of 4 on j-node-0-0\nmpi-hello: rank 1 of 4 on j-node-0-0\nmpi-hello: rank 2 of 4 on other\nmpi-hello: rank 3 of 4 on j-node-0-1\n",
			wantErr: "ranks [2] ran on other, which is not a Worker",
		},
		"no output": {
			log:     "hello\n",
			wantErr: "no rank reported",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := ParsePlacement(tc.log).Check(workers, "j-launcher-0-0", 2)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}
