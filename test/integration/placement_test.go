//go:build e2e

package integration

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/placement"
	"github.com/mpijob/mpijob/test/framework"
)

// heard collects the placement warnings admission sends.
type heard struct {
	mu    sync.Mutex
	lines []string
}

func (h *heard) HandleWarningHeader(code int, _, text string) {
	line, ok := placement.FromWarning(code, text)
	if !ok {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lines = append(h.lines, line)
}

// take returns the lines heard since the last take.
func (h *heard) take() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.lines
	h.lines = nil
	return out
}

var freeGPUs = regexp.MustCompile(`^free GPUs now: (\d+) of (\d+) nvidia\.com/gpu on \d+ nodes?\.$`)

// A server dry run of a create says whether the cluster can place the job
// now: whether its pods fit in what the nodes have free, the free GPUs
// (held ones not counted), and where it would stand in its Kueue queue.
// A real create says none of it.
func TestPlacementAtServerDryRun(t *testing.T) {
	c := framework.Get(t)
	ctx := context.Background()
	ns := c.NewNamespace(t, "placement")
	cq := newQueue(t, c, ns, 8)
	h := &heard{}
	cfg := rest.CopyConfig(c.Config)
	cfg.WarningHandler = h
	cl, err := client.New(cfg, client.Options{Scheme: api.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}

	// The GPUs the schedulable GPU nodes offer in all: a number that does
	// not change while the test runs (the kwok nodes stay).
	nodes := &corev1.NodeList{}
	if err := c.Client.List(ctx, nodes); err != nil {
		t.Fatal(err)
	}
	total := 0
	for i := range nodes.Items {
		if q, ok := nodes.Items[i].Status.Allocatable["nvidia.com/gpu"]; ok && placement.Schedulable(&nodes.Items[i]) {
			total += int(q.Value())
		}
	}
	if total < 16 {
		t.Fatalf("the local cluster offers %d GPUs on schedulable nodes; the test needs its kwok GPU nodes (16 at least)", total)
	}

	// first holds all 8 of the queue's GPUs; second waits for them.
	first := framework.MakeTrainJob("first", ns, "mpi-openmpi-gpu").NumNodes(2).GPUsPerWorker(4).OnKwokNodes().HoldOnKwok().Queue("q")
	if err := framework.SubmitW(ctx, c.Client, first); err != nil {
		t.Fatal(err)
	}
	c.WaitForStatus(t, ns, "first", 2*time.Minute, func(s api.Status) bool { return s.Phase == api.PhaseRunning })
	second := framework.MakeTrainJob("second", ns, "mpi-openmpi-gpu").NumNodes(2).GPUsPerWorker(4).OnKwokNodes().Queue("q")
	if err := framework.SubmitW(ctx, c.Client, second); err != nil {
		t.Fatal(err)
	}
	c.WaitForStatus(t, ns, "second", time.Minute, func(s api.Status) bool { return s.Phase == api.PhaseQueued })

	third := framework.MakeTrainJob("third", ns, "mpi-openmpi-gpu").NumNodes(1).GPUsPerWorker(2).OnKwokNodes().Queue("q")
	var lines []string
	// The manager's queue snapshot is at most a few seconds old.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err := framework.SubmitW(ctx, cl, third, client.DryRunAll); err != nil {
			t.Fatalf("server dry run: %v", err)
		}
		lines = h.take()
		if len(lines) == 3 && strings.Contains(lines[2], "1 job waits ahead") || time.Now().After(deadline) {
			break
		}
		time.Sleep(2 * time.Second)
	}
	t.Logf("dry run of third:\n%s", strings.Join(lines, "\n"))
	if len(lines) != 3 {
		t.Fatalf("dry run said %d placement lines, want 3 (fit, free GPUs, queue): %q", len(lines), lines)
	}
	if want := "fits now: the Launcher and 1 Worker (each 2 nvidia.com/gpu"; !strings.HasPrefix(lines[0], want) {
		t.Errorf("fit: %q, want it to start %q", lines[0], want)
	}
	m := freeGPUs.FindStringSubmatch(lines[1])
	if m == nil {
		t.Fatalf("free GPUs: %q does not read %s", lines[1], freeGPUs)
	}
	free, all := atoi(t, m[1]), atoi(t, m[2])
	if all != total {
		t.Errorf("free GPUs: of %d, want the %d the schedulable nodes offer", all, total)
	}
	if free > total-8 {
		t.Errorf("free GPUs: %d free of %d while first holds 8: held GPUs counted as free", free, total)
	}
	want := fmt.Sprintf("Kueue queue %s/q (ClusterQueue %s): 1 job waits ahead of this one, so it would be number 2; estimated start unknown: no finished job in %s to estimate a start from.", ns, cq, ns)
	if lines[2] != want {
		t.Errorf("queue:\n got %q\nwant %q", lines[2], want)
	}

	// A Worker larger than any node: never, with the largest named.
	huge := framework.MakeTrainJob("huge", ns, "mpi-openmpi-gpu").NumNodes(1).GPUsPerWorker(9).OnKwokNodes().Queue("q")
	if err := framework.SubmitW(ctx, cl, huge, client.DryRunAll); err != nil {
		t.Fatalf("server dry run: %v", err)
	}
	lines = h.take()
	if want := "never fits as the cluster is now: a Worker asks for 9 nvidia.com/gpu, and no node it may use has that much allocatable even with nothing else running (the most one has: 8)"; len(lines) == 0 || !strings.HasPrefix(lines[0], want) {
		t.Errorf("huge: %q, want it to start %q", lines, want)
	}

	// A real create: nothing said of placement.
	if err := framework.SubmitW(ctx, cl, framework.MakeTrainJob("real", ns, "mpi-openmpi-gpu").NumNodes(1).GPUsPerWorker(2).OnKwokNodes().Queue("q")); err != nil {
		t.Fatal(err)
	}
	if got := h.take(); len(got) != 0 {
		t.Errorf("a real create said placement: %q", got)
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
