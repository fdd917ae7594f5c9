//go:build e2e

package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/diagnose"
	"github.com/mpijob/mpijob/test/framework"
)

// Failures that need real GPUs or memory pressure, faked on kwok GPU nodes
// by mpijob's kwok stages, are diagnosed with the Worker, the numbers and
// a next step.
func TestDiagnosisOfKwokFailures(t *testing.T) {
	c := framework.Get(t)
	cases := map[string]struct {
		job         *framework.TrainJobWrapper
		wantPhase   api.Phase
		wantReason  string
		wantMessage []string
	}{
		"a Worker is OOMKilled": {
			job:       framework.MakeTrainJob("oom", "", "mpi-openmpi-gpu").NumNodes(2).OnKwokNodes().FailWorkersOnKwok("OOMKilled"),
			wantPhase: api.PhaseFailed, wantReason: diagnose.ReasonWorkerOOMKilled,
			wantMessage: []string{"Worker 0 (pod oom-node-0-0-", "ran out of memory and was killed (exit code 137, OOMKilled): its memory limit is 4Gi."},
		},
		"a Worker is evicted": {
			job:       framework.MakeTrainJob("evict", "", "mpi-openmpi-gpu").NumNodes(1).OnKwokNodes().FailWorkersOnKwok("Evicted"),
			wantPhase: api.PhaseFailed, wantReason: diagnose.ReasonWorkerEvicted,
			wantMessage: []string{"Worker 0 (pod evict-node-0-0-", "was evicted from node kwok-gpu-", "The node was low on resource: memory."},
		},
		"Workers that fit no node": {
			job: framework.MakeTrainJob("huge", "", "mpi-openmpi-gpu").NumNodes(2).GPUsPerWorker(9).OnKwokNodes(),
			// No kwok node has more than 8 GPUs: no wait helps.
			wantPhase: api.PhasePending, wantReason: diagnose.ReasonCannotStart,
			wantMessage: []string{"The job can never start: no node could take a Worker even if the cluster were empty",
				"16 nodes have less than the 9 nvidia.com/gpu one Worker asks for (the largest has 8)"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ns := c.NewNamespace(t, "kwokfail")
			job := tc.job.Obj()
			job.Namespace = ns
			if err := framework.Submit(context.Background(), c.Client, job, tc.job.Runtime()); err != nil {
				t.Fatal(err)
			}
			// The message can sharpen while the job waits (the Workers' pods
			// appear after the first diagnosis): wait for the whole of it.
			s := c.WaitForStatus(t, ns, job.Name, 2*time.Minute, func(s api.Status) bool {
				if s.Phase != tc.wantPhase || s.Reason != tc.wantReason {
					return false
				}
				for _, want := range tc.wantMessage {
					if !strings.Contains(s.Message, want) {
						return false
					}
				}
				return true
			})
			if s.NextStep == "" {
				t.Error("no next step")
			}
		})
	}
}
