package localcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// startProcess runs bin with args in its own session so that it outlives the
// command that started it (make dev --detach) and is not hit by the
// terminal's Ctrl-C directly; Down stops it through its pid file.
func (c *Cluster) startProcess(name, bin string, args []string, env []string) error {
	if err := os.MkdirAll(c.opts.logDir(), 0o755); err != nil {
		return err
	}
	if err := os.MkdirAll(c.opts.runDir(), 0o755); err != nil {
		return err
	}
	logPath := filepath.Join(c.opts.logDir(), name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("failed to open log for %s: %w", name, err)
	}
	defer func() { _ = logFile.Close() }()
	cmd := exec.Command(bin, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("failed to start %s (%s): %w", name, bin, err)
	}
	pid := cmd.Process.Pid
	// Reap the child if it dies while we still run, so it does not linger
	// as a zombie that looks alive to processAlive.
	go func() { _ = cmd.Wait() }()
	c.mu.Lock()
	c.pids[name] = pid
	c.mu.Unlock()
	spec, err := json.Marshal(procSpec{Bin: bin, Args: args, Env: env})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(c.opts.runDir(), name+".cmd"), spec, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(c.opts.runDir(), name+".pid"), []byte(strconv.Itoa(pid)), 0o644)
}

// procSpec is how a process was started, so it can be started again.
type procSpec struct {
	Bin  string   `json:"bin"`
	Args []string `json:"args"`
	Env  []string `json:"env,omitempty"`
}

// processAlive reports whether pid runs and is not a zombie.
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

// checkAlive returns an error naming the process and its log when it died.
func (c *Cluster) checkAlive(name string) error {
	c.mu.Lock()
	pid := c.pids[name]
	c.mu.Unlock()
	if processAlive(pid) {
		return nil
	}
	return fmt.Errorf("%s exited; last lines of %s:\n%s", name, filepath.Join(c.opts.logDir(), name+".log"), c.logTail(name, 15))
}

func (c *Cluster) logTail(name string, n int) string {
	b, err := os.ReadFile(filepath.Join(c.opts.logDir(), name+".log"))
	if err != nil {
		return "  (no log)"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ")
}

// waitFor polls cond until it returns true, the process name dies, or the
// timeout passes.
func (c *Cluster) waitFor(ctx context.Context, name string, timeout time.Duration, cond func(context.Context) bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		if cond(ctx) {
			return nil
		}
		if name != "" {
			if err := c.checkAlive(name); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			if name != "" {
				return fmt.Errorf("%s not ready after %s; last lines of its log:\n%s", name, timeout, c.logTail(name, 15))
			}
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// stopAll stops the cluster's processes in reverse order of dependence:
// clients of the apiserver first (an apiserver with clients attached can
// ignore SIGTERM for 30 s), then the apiserver, then etcd.
func stopAll(runDir string) []string {
	last := map[string]int{"kube-apiserver": 1, "etcd": 2}
	var stopped []string
	for phase := 0; phase <= 2; phase++ {
		stopped = append(stopped, stopPidFiles(runDir, 5*time.Second, func(name string) bool { return last[name] == phase })...)
	}
	return stopped
}

// stopPidFiles signals every process with a pid file in runDir whose name
// match selects, waits for them to exit and kills what is left after grace.
func stopPidFiles(runDir string, grace time.Duration, match func(string) bool) []string {
	entries, _ := os.ReadDir(runDir)
	var pids []int
	var names []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".pid") || !match(strings.TrimSuffix(e.Name(), ".pid")) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(runDir, e.Name()))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err == nil && processAlive(pid) && isOurs(pid, runDir) {
			pids = append(pids, pid)
			names = append(names, strings.TrimSuffix(e.Name(), ".pid"))
			// One SIGTERM only: a second one makes controller-runtime's
			// signal handler exit at once, skipping the graceful stop (the
			// manager would keep its leader Lease until it expires).
			if err := syscall.Kill(-pid, syscall.SIGTERM); err != nil {
				_ = syscall.Kill(pid, syscall.SIGTERM)
			}
		}
		_ = os.Remove(filepath.Join(runDir, e.Name()))
	}
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		alive := false
		for _, pid := range pids {
			if processAlive(pid) {
				alive = true
			}
		}
		if !alive {
			return names
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, pid := range pids {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	return names
}

// isOurs guards against a recycled pid: the process must have been started
// from the cluster's cache or state folders (its binary or arguments name them).
func isOurs(pid int, runDir string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	cmdline := string(b)
	state := filepath.Dir(runDir)
	return strings.Contains(cmdline, state) || strings.Contains(cmdline, "mpijob")
}

// ErrNotRoot says the local cluster needs root.
var ErrNotRoot = errors.New("the local cluster runs kubelets and containerd and must run as root: run it with sudo (or as root in a VM/container with cgroups)")
