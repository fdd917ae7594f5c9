package images

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// ssh, as mpirun runs it with the images' ssh settings, waits until a
// Worker's name resolves before resolving it itself (CoreDNS's brief
// NXDOMAIN for a running pod's name failed a job: HostUnreachable), and
// gives up after MPIJOB_RESOLVE_WAIT seconds, leaving ssh to say why. The
// images' real ssh client reads the real settings file; only getent and
// the script's path are this test's.
func TestSSHWaitsUntilAWorkerResolves(t *testing.T) {
	_, noSSH := exec.LookPath("ssh")
	if noSSH != nil {
		t.Logf("no ssh client here (%v): the script runs as ssh's Match would run it", noSSH)
	}
	script, err := filepath.Abs(filepath.Join("..", "..", "..", "images", "common", "mpijob-wait-resolve"))
	if err != nil {
		t.Fatal(err)
	}
	settings, err := os.ReadFile(filepath.Join("..", "..", "..", "images", "common", "ssh_config"))
	if err != nil {
		t.Fatal(err)
	}
	const installed = "/usr/local/bin/mpijob-wait-resolve"
	if !strings.Contains(string(settings), `Match exec "`+installed+` %h"`) {
		t.Fatalf("images/common/ssh_config runs no %s before resolving a name:\n%s", installed, settings)
	}
	for name, tc := range map[string]struct {
		resolvesAt int // getent's call that succeeds; 0: none
		wait       string
		wantCalls  int
	}{
		"resolves at the third try": {resolvesAt: 3, wantCalls: 3},
		"resolves at once":          {resolvesAt: 1, wantCalls: 1},
		"never resolves: gives up":  {resolvesAt: 0, wait: "2", wantCalls: 2},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			getent := "#!/bin/sh\nn=$(cat \"$0.calls\" 2>/dev/null || echo 0); n=$((n+1)); echo $n > \"$0.calls\"\n" +
				"[ \"$1\" = ahosts ] && [ \"$2\" = pi-node-0-1.pi ] && [ " + strconv.Itoa(tc.resolvesAt) + " -gt 0 ] && [ \"$n\" -ge " + strconv.Itoa(tc.resolvesAt) + " ]\n"
			if err := os.WriteFile(filepath.Join(dir, "getent"), []byte(getent), 0o755); err != nil {
				t.Fatal(err)
			}
			cfg := filepath.Join(dir, "ssh_config")
			if err := os.WriteFile(cfg, []byte(strings.ReplaceAll(string(settings), installed, script)), 0o644); err != nil {
				t.Fatal(err)
			}
			if noSSH == nil {
				cmd := exec.Command("ssh", "-F", cfg, "-G", "pi-node-0-1.pi")
				cmd.Env = env(dir, tc.wait)
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("ssh -G: %v\n%s", err, out)
				}
				// The Match sets nothing: the Host settings still apply.
				if !strings.Contains(string(out), "\nport 2222\n") {
					t.Errorf("ssh's settings lost port 2222 after the Match:\n%s", out)
				}
			} else {
				cmd := exec.Command(script, "pi-node-0-1.pi")
				cmd.Env = env(dir, tc.wait)
				var exit *exec.ExitError
				if err := cmd.Run(); !errors.As(err, &exit) || exit.ExitCode() != 1 {
					t.Errorf("the script ended %v, want exit status 1 (the Match never applies)", err)
				}
			}
			calls, _ := os.ReadFile(filepath.Join(dir, "getent.calls"))
			if got := strings.TrimSpace(string(calls)); got != strconv.Itoa(tc.wantCalls) {
				t.Errorf("getent ran %s times, want %d", got, tc.wantCalls)
			}
		})
	}
}

// env is the script's environment: the fake getent first on PATH, and
// MPIJOB_RESOLVE_WAIT when set.
func env(dir, wait string) []string {
	e := append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"))
	if wait != "" {
		e = append(e, "MPIJOB_RESOLVE_WAIT="+wait)
	}
	return e
}
