package localcluster

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/mpijob/mpijob/pkg/localcluster/images"
)

// debianPackages are what the real nodes and the image builder need.
var debianPackages = []string{
	"containerd", "runc", "containernetworking-plugins", "debootstrap", "iproute2",
	"iptables", "ipset", "mount", "util-linux", "gcc", "libc6-dev",
	// The CA bundle copied into the mpijob-manager and dashboard images.
	"ca-certificates",
}

// preflight checks what the cluster needs from this machine and fails with
// one line that says what to do.
func (c *Cluster) preflight() error {
	if os.Geteuid() != 0 {
		return ErrNotRoot
	}
	if _, err := os.Stat("/sys/fs/cgroup/memory"); err != nil {
		if _, err2 := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err2 != nil {
			return fmt.Errorf("no cgroups at /sys/fs/cgroup: the local cluster needs a cgroup v1 or v2 hierarchy mounted there (run it on a VM or a privileged container)")
		}
	}
	if _, err := exec.LookPath("go"); err != nil {
		return fmt.Errorf("go is not on PATH: install Go 1.26 (the toolchain is built from Go modules)")
	}
	return checkPorts(clusterPorts)
}

// portUse is a loopback address the cluster binds and who binds it.
type portUse struct{ addr, what string }

var clusterPorts = []portUse{
	{fmt.Sprintf("127.0.0.1:%d", APIServerPort), "kube-apiserver"},
	{fmt.Sprintf("127.0.0.1:%d", etcdClientPort), "etcd"},
	{fmt.Sprintf("127.0.0.1:%d", etcdPeerPort), "etcd peer"},
	{fmt.Sprintf("127.0.0.1:%d", trainerWebhookPort), "Trainer webhook"},
	{fmt.Sprintf("127.0.0.1:%d", jobsetWebhookPort), "JobSet webhook"},
	{fmt.Sprintf("127.0.0.1:%d", trainerHealthPort), "Trainer health"},
	{fmt.Sprintf("127.0.0.1:%d", jobsetHealthPort), "JobSet health"},
	{fmt.Sprintf("127.0.0.1:%d", kwokServerPort), "kwok"},
	{fmt.Sprintf("127.0.0.1:%d", DashboardPort), "mpijob-dashboard"},
	{fmt.Sprintf("127.0.0.1:%d", kubeRouterHealthPort), "kube-router health"},
	{fmt.Sprintf("127.0.0.1:%d", kubeProxyHealthPort), "kube-proxy health"},
	{fmt.Sprintf("127.0.0.1:%d", kubeProxyMetricsPort), "kube-proxy metrics"},
	{fmt.Sprintf("127.0.0.1:%d", PrometheusPort), "Prometheus"},
	{fmt.Sprintf("127.0.0.1:%d", lokiPort), "Loki"},
	{fmt.Sprintf("127.0.0.1:%d", lokiGRPCPort), "Loki gRPC"},
	{"127.0.0.1:10257", "kube-controller-manager"},
	{"127.0.0.1:10259", "kube-scheduler"},
}

// checkPorts fails with one line naming the first busy port and what to do.
func checkPorts(ports []portUse) error {
	for _, p := range ports {
		l, err := net.Listen("tcp", p.addr)
		if err != nil {
			return fmt.Errorf("port %s (for %s) is busy: stop what holds it (`ss -ltnp 'sport = :%s'`) or run `make dev-down` if it is an old local cluster",
				p.addr, p.what, p.addr[strings.LastIndex(p.addr, ":")+1:])
		}
		_ = l.Close()
	}
	return nil
}

// installPackages installs the Debian packages that are missing.
func installPackages(ctx context.Context, p *Progress) error {
	var missing []string
	for _, pkg := range debianPackages {
		out, err := exec.CommandContext(ctx, "dpkg-query", "-W", "-f=${Status}", pkg).Output()
		if err != nil || !strings.Contains(string(out), "install ok installed") {
			missing = append(missing, pkg)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return fmt.Errorf("missing packages %s and no apt-get: install them with your package manager", strings.Join(missing, " "))
	}
	done := p.Step("installing Debian packages: %s", strings.Join(missing, " "))
	if out, err := exec.CommandContext(ctx, "apt-get", "update", "-qq").CombinedOutput(); err != nil {
		return fmt.Errorf("apt-get update failed: %w\n%s", err, out)
	}
	cmd := exec.CommandContext(ctx, "apt-get", append([]string{"install", "-y", "-qq", "--no-install-recommends"}, missing...)...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("apt-get install %s failed: %w\n%s", strings.Join(missing, " "), err, out)
	}
	done()
	return nil
}

// v1Controllers lists the cgroup v1 hierarchies mounted under /sys/fs/cgroup
// (empty on a pure cgroup v2 host).
func v1Controllers() []string {
	entries, _ := os.ReadDir("/sys/fs/cgroup")
	var out []string
	for _, e := range entries {
		if !e.IsDir() || e.Name() == "unified" {
			continue
		}
		if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", e.Name(), "tasks")); err == nil {
			out = append(out, e.Name())
		}
	}
	return out
}

// fixHybridCgroups mounts a v1 hugetlb hierarchy when the v2 mount at
// /sys/fs/cgroup/unified holds hugetlb: runc refuses that hybrid otherwise.
func fixHybridCgroups() error {
	b, err := os.ReadFile("/sys/fs/cgroup/unified/cgroup.controllers")
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("failed to read the cgroup v2 controllers: %w", err)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	if _, err := os.Stat("/sys/fs/cgroup/hugetlb/tasks"); err == nil {
		return nil
	}
	if err := os.MkdirAll("/sys/fs/cgroup/hugetlb", 0o755); err != nil {
		return fmt.Errorf("failed to create /sys/fs/cgroup/hugetlb: %w", err)
	}
	if out, err := exec.Command("mount", "-t", "cgroup", "-o", "hugetlb", "cgroup", "/sys/fs/cgroup/hugetlb").CombinedOutput(); err != nil {
		return fmt.Errorf("failed to mount the hugetlb cgroup (hybrid cgroup host): %w: %s", err, out)
	}
	return nil
}

// makeCgroupRoot creates the node's cgroup in every v1 hierarchy, copying
// the cpuset of the parent so tasks can join it.
func makeCgroupRoot(name string) error {
	for _, ctl := range v1Controllers() {
		dir := filepath.Join("/sys/fs/cgroup", ctl, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("failed to create cgroup %s: %w", dir, err)
		}
		if ctl == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/cpuset", f))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
					return fmt.Errorf("failed to write %s/%s: %w", dir, f, err)
				}
			}
		}
	}
	return nil
}

// removeCgroupTree kills every task in cgroup name (all hierarchies) and
// removes its folders, deepest first.
func removeCgroupTree(name string) {
	roots := []string{}
	for _, ctl := range v1Controllers() {
		roots = append(roots, filepath.Join("/sys/fs/cgroup", ctl, name))
	}
	roots = append(roots, filepath.Join("/sys/fs/cgroup/unified", name), filepath.Join("/sys/fs/cgroup", name))
	for _, root := range roots {
		if _, err := os.Stat(root); err != nil {
			continue
		}
		var dirs []string
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			killTasks(dirs[i])
		}
		for attempt := 0; attempt < 20; attempt++ {
			left := 0
			for i := len(dirs) - 1; i >= 0; i-- {
				if err := os.Remove(dirs[i]); err != nil && !os.IsNotExist(err) {
					left++
				}
			}
			if left == 0 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

func killTasks(dir string) {
	for _, f := range []string{"cgroup.procs", "tasks"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			continue
		}
		for _, s := range strings.Fields(string(b)) {
			var pid int
			if _, err := fmt.Sscan(s, &pid); err == nil && pid > 1 && pid != os.Getpid() {
				_ = killPid(pid)
			}
		}
	}
}

// setHostsLines replaces the lines this package owns in /etc/hosts.
func setHostsLines(lines []string) error {
	b, err := os.ReadFile("/etc/hosts")
	if err != nil {
		return err
	}
	var keep []string
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if !strings.HasSuffix(l, hostsMarker) {
			keep = append(keep, l)
		}
	}
	for _, l := range lines {
		keep = append(keep, l+" "+hostsMarker)
	}
	// Write in place: /etc/hosts is often a bind mount that rename cannot replace.
	return os.WriteFile("/etc/hosts", []byte(strings.Join(keep, "\n")+"\n"), 0o644)
}

// ensureBridge creates the pod bridge holding DNSAddress.
func ensureBridge() error {
	if _, err := net.InterfaceByName(bridgeName); err != nil {
		if out, err := exec.Command("ip", "link", "add", bridgeName, "type", "bridge").CombinedOutput(); err != nil {
			return fmt.Errorf("failed to create bridge %s: %w: %s", bridgeName, err, out)
		}
	}
	_ = exec.Command("ip", "addr", "add", DNSAddress+"/16", "dev", bridgeName).Run()
	if out, err := exec.Command("ip", "link", "set", bridgeName, "up").CombinedOutput(); err != nil {
		return fmt.Errorf("failed to bring up bridge %s: %w: %s", bridgeName, err, out)
	}
	return nil
}

func deleteBridge() {
	_ = exec.Command("ip", "link", "del", bridgeName).Run()
}

// unmountUnder unmounts every mount point below any of prefixes, deepest first.
func unmountUnder(prefixes ...string) int {
	n := 0
	for attempt := 0; attempt < 3; attempt++ {
		b, err := os.ReadFile("/proc/self/mountinfo")
		if err != nil {
			return n
		}
		var points []string
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) < 5 {
				continue
			}
			mp := unescapeMount(f[4])
			for _, p := range prefixes {
				if p != "" && (mp == p || strings.HasPrefix(mp, p+"/")) {
					points = append(points, mp)
					break
				}
			}
		}
		if len(points) == 0 {
			return n
		}
		// Deepest first.
		for i := 0; i < len(points); i++ {
			for j := i + 1; j < len(points); j++ {
				if len(points[j]) > len(points[i]) {
					points[i], points[j] = points[j], points[i]
				}
			}
		}
		for _, mp := range points {
			if err := images.Unmount(mp); err == nil {
				n++
			}
		}
	}
	return n
}

func unescapeMount(s string) string {
	return strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`).Replace(s)
}
