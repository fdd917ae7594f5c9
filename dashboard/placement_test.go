package dashboard

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Admission's placement warnings reach the request whose context collects
// them, and only those; other warnings and other requests get nothing.
func TestPlacementWarnings(t *testing.T) {
	h := placementWarnings{}
	ctx, mine := withPlacement(context.Background())
	other, theirs := withPlacement(context.Background())
	h.HandleWarningHeaderWithContext(ctx, 299, "", "Placement: fits now: the Launcher and 2 Workers (each 1 cpu) fit in what the nodes have free.")
	h.HandleWarningHeaderWithContext(ctx, 299, "", "spec.trainer.resourcesPerNode: no memory limit")
	h.HandleWarningHeaderWithContext(context.Background(), 299, "", "Placement: lost: no request collects it")
	h.HandleWarningHeaderWithContext(ctx, 299, "", "Placement: free GPUs now: 0 of 8 nvidia.com/gpu on 0 nodes.")
	want := []string{"fits now: the Launcher and 2 Workers (each 1 cpu) fit in what the nodes have free.", "free GPUs now: 0 of 8 nvidia.com/gpu on 0 nodes."}
	if diff := cmp.Diff(want, mine.get()); diff != "" {
		t.Errorf("placement (-want +got):\n%s", diff)
	}
	if got := theirs.get(); got != nil {
		t.Errorf("another request heard %q", got)
	}
	_ = other
}
