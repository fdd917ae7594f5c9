package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

const (
	// registryDBPort is the model registry's PostgreSQL, on loopback.
	registryDBPort = 9466
	// RegistryPort is the model registry's REST API, on the pod network's
	// bridge: the API server's service proxy and pods reach it through the
	// Service model-registry/model-registry (config/dev/model-registry.yaml).
	RegistryPort = 9467
	// RegistryNamespace and RegistryService name the registry's Service.
	RegistryNamespace = "model-registry"
	RegistryService   = "model-registry"
	// registryDBUser runs PostgreSQL, which refuses to run as root: the
	// unprivileged user nobody.
	registryDBUser = 65534
)

// RegistryURL is the registry as this machine and the pods reach it.
var RegistryURL = fmt.Sprintf("http://%s:%d", DNSAddress, RegistryPort)

// registryDBDSN is the registry's database.
var registryDBDSN = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", registryDBPort)

// startModelRegistry starts the model registry: PostgreSQL 17 (its data
// under the state folder, kept across `down` and `up` like the log
// store's), then the Kubeflow Model Registry server on the bridge.
func (c *Cluster) startModelRegistry(ctx context.Context) error {
	dir := c.opts.path("model-registry")
	// PostgreSQL runs as nobody, who cannot reach the cache under a home
	// folder closed to others: it runs from a linked copy here.
	pg := filepath.Join(dir, "postgres")
	if err := linkTree(c.opts.bin("postgres"), pg); err != nil {
		return fmt.Errorf("the model registry's PostgreSQL: %w", err)
	}
	data := filepath.Join(dir, "pgdata")
	if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); err != nil {
		_ = os.RemoveAll(data)
		if err := os.MkdirAll(data, 0o700); err != nil {
			return err
		}
		if err := os.Chown(data, registryDBUser, registryDBUser); err != nil {
			return err
		}
		cmd := exec.CommandContext(ctx, "setpriv", "--reuid", fmt.Sprint(registryDBUser), "--regid", fmt.Sprint(registryDBUser), "--clear-groups",
			filepath.Join(pg, "bin", "initdb"), "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("initdb of the model registry's database in %s: %w\n%s", data, err, out)
		}
	}
	args := []string{"--reuid", fmt.Sprint(registryDBUser), "--regid", fmt.Sprint(registryDBUser), "--clear-groups",
		filepath.Join(pg, "bin", "postgres"), "-D", data, "-h", "127.0.0.1", "-p", fmt.Sprint(registryDBPort), "-k", data}
	if err := c.startProcess("model-registry-db", "setpriv", args, nil); err != nil {
		return err
	}
	// The server connects and runs its migrations at start.
	if err := c.waitFor(ctx, "model-registry-db", 60*time.Second, func(context.Context) bool {
		_, err := os.Stat(filepath.Join(data, "postmaster.pid"))
		return err == nil && tcpOpen(fmt.Sprintf("127.0.0.1:%d", registryDBPort))
	}); err != nil {
		return err
	}
	if err := c.startProcess("model-registry", c.opts.bin("model-registry"), []string{"proxy",
		"--hostname", DNSAddress, "--port", fmt.Sprint(RegistryPort),
		"--embedmd-database-type", "postgres", "--embedmd-database-dsn", registryDBDSN}, nil); err != nil {
		return err
	}
	return c.waitFor(ctx, "model-registry", 120*time.Second, func(ctx context.Context) bool {
		return httpOK(ctx, RegistryURL+"/readyz/health")
	})
}

// tcpOpen reports whether something listens on addr.
func tcpOpen(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	_ = conn.Close()
	return true
}

// linkTree makes dst a tree of hard links to src's files (a copy where a
// link cannot be made), replacing what dst held.
func linkTree(src, dst string) error {
	if _, err := os.Stat(src); err != nil {
		return fmt.Errorf("%s is not built: %w", src, err)
	}
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o755)
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, to)
		}
		if err := os.Link(p, to); err == nil {
			return nil
		} else if !errors.Is(err, os.ErrExist) && !strings.Contains(err.Error(), "cross-device") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, info.Mode().Perm())
	})
}
