package cli

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/rest"
)

// What admission says of placement is kept for create's answer; every
// other warning reaches stderr as kubectl shows it.
func TestWarningSplitter(t *testing.T) {
	var errOut bytes.Buffer
	w := &warningSplitter{next: rest.NewWarningWriter(&errOut, rest.WarningWriterOptions{})}
	w.HandleWarningHeader(299, "", "Placement: fits now: the Launcher and 2 Workers (each 1 cpu) fit in what the nodes have free.")
	w.HandleWarningHeader(299, "", "spec.trainer.resourcesPerNode: no memory limit")
	w.HandleWarningHeader(299, "", "Placement: free GPUs now: 8 of 8 nvidia.com/gpu on 2 nodes.")
	want := []string{"fits now: the Launcher and 2 Workers (each 1 cpu) fit in what the nodes have free.", "free GPUs now: 8 of 8 nvidia.com/gpu on 2 nodes."}
	if diff := cmp.Diff(want, w.Placement()); diff != "" {
		t.Errorf("placement (-want +got):\n%s", diff)
	}
	if got := w.Placement(); got != nil {
		t.Errorf("placement read twice: %q", got)
	}
	if diff := cmp.Diff("Warning: spec.trainer.resourcesPerNode: no memory limit\n", errOut.String()); diff != "" {
		t.Errorf("stderr (-want +got):\n%s", diff)
	}
	var out bytes.Buffer
	printPlacement(&out, want)
	if diff := cmp.Diff("Can the cluster place it now?\n  "+want[0]+"\n  "+want[1]+"\n", out.String()); diff != "" {
		t.Errorf("printed (-want +got):\n%s", diff)
	}
}
