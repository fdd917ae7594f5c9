package framework

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// HeavyCPU marks a test whose workload keeps the machine's cores busy (MPI
// training, a browser): such tests take turns, one at a time across the
// test packages (the e2e and integration packages run side by side, each
// its own process), through a lock on a file. Light tests still run beside
// them. Two trainings at once on the project's two-core machine starved
// each other, the API server and mpijob-manager (load average above 150:
// ranks that finish in 2 s alone did not finish in 10 min, and the
// manager's Lease renewals timed out). Call it right after t.Parallel();
// the turn ends with the test.
func HeavyCPU(t testing.TB) {
	t.Helper()
	path := filepath.Join(os.TempDir(), "mpijob-e2e-heavy-cpu.lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatalf("the heavy tests' lock %s: %v", path, err)
	}
	start := time.Now()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		t.Fatalf("taking the heavy tests' lock %s: %v", path, err)
	}
	if waited := time.Since(start); waited > time.Second {
		t.Logf("waited %s for its turn among the CPU-heavy tests (framework.HeavyCPU)", waited.Round(time.Second))
	}
	t.Cleanup(func() { _ = f.Close() }) // closing releases the lock
}
