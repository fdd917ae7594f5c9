package localcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/mpijob/mpijob/pkg/manifests"
)

// Reload is the developer's inner loop on a running local cluster: it
// rebuilds mpijob-manager and mpijob-dashboard from this checkout, applies
// the manager's role and the MPI runtimes again and restarts both, without
// restarting the cluster or touching its jobs.
func Reload(ctx context.Context, opts Options, out io.Writer) error {
	if ok, msg := Status(ctx, opts); !ok {
		return fmt.Errorf("%s", msg)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", opts.KubeconfigPath())
	if err != nil {
		return fmt.Errorf("the local cluster's kubeconfig is unreadable: %w", err)
	}
	c := &Cluster{opts: opts, pids: map[string]int{}, restCfg: cfg}
	for _, name := range []string{"mpijob-manager", "mpijob-dashboard"} {
		// Build where the running cluster started it from (its start
		// record), whatever cache directory this shell names.
		bin := opts.bin(name)
		if b, err := os.ReadFile(filepath.Join(opts.runDir(), name+".cmd")); err == nil {
			var spec procSpec
			if json.Unmarshal(b, &spec) == nil && spec.Bin != "" {
				bin = spec.Bin
			}
		}
		fmt.Fprintf(out, "building %s into %s\n", name, bin)
		cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/"+name)
		cmd.Dir = opts.RepoRoot
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("failed to build %s: %w\n%s", name, err, b)
		}
	}
	cl, err := c.newClient()
	if err != nil {
		return err
	}
	var dirs []string
	for _, d := range []string{"config/rbac/manager", "config/rbac/aggregate", "config/runtimes"} {
		dirs = append(dirs, filepath.Join(opts.RepoRoot, d))
	}
	objs, err := manifests.ParseFiles(dirs...)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "applying %d objects (manager role, aggregated roles, runtimes)\n", len(objs))
	if err := manifests.Apply(ctx, cl, fieldOwner, objs); err != nil {
		return err
	}
	fmt.Fprintln(out, "restarting mpijob-manager")
	if err := RestartProcess(opts, "mpijob-manager"); err != nil {
		return err
	}
	if b, err := os.ReadFile(filepath.Join(opts.runDir(), "mpijob-manager.pid")); err == nil {
		c.pids["mpijob-manager"], _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	if err := c.waitHealthy(ctx, "mpijob-manager", managerHealthPort); err != nil {
		return err
	}
	fmt.Fprintln(out, "restarting mpijob-dashboard")
	if err := RestartProcess(opts, "mpijob-dashboard"); err != nil {
		return err
	}
	fmt.Fprintln(out, "reloaded")
	return nil
}
