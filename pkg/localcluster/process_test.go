package localcluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ProcessCPU reads this test's own process: its program name as the kernel
// keeps it (15 characters at most), and an error for a process that is not.
func TestProcessCPU(t *testing.T) {
	comm, _, err := ProcessCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Base(os.Args[0])
	if len(want) > 15 {
		want = want[:15]
	}
	if comm != want {
		t.Errorf("comm = %q, want %q", comm, want)
	}
	if _, _, err := ProcessCPU(-1); err == nil || !strings.Contains(err.Error(), "/proc/-1/stat") {
		t.Errorf("ProcessCPU(-1) error = %v, want one naming /proc/-1/stat", err)
	}
}
