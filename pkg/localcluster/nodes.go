package localcluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mpijob/mpijob/pkg/localcluster/pki"
)

// realNode is one kubelet + containerd pair.
type realNode struct {
	index int
	name  string
	addr  string
	// state holds the kubelet's root, logs and configuration; removed by Down.
	state string
	// store keeps containerd's content and snapshots between runs, so a warm
	// start does not import the images again.
	store string
	// run holds sockets and runc state (under /run, a tmpfs).
	run string
}

func (c *Cluster) realNode(i int) realNode {
	n := nodeName(i)
	return realNode{
		index: i, name: n, addr: nodeAddress(i),
		state: c.opts.path("nodes", n),
		store: filepath.Join(c.opts.CacheDir, "nodes", n, "containerd"),
		run:   filepath.Join("/run/mpijob", n),
	}
}

func (n realNode) socket() string { return filepath.Join(n.run, "containerd.sock") }

func (n realNode) containerdConfig() string {
	return fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.grpc.v1.cri.v1alpha2", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]

[grpc]
  address = %q

[ttrpc]
  address = %q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  # This host lacks CAP_SYS_RESOURCE: runc cannot lower oom_score_adj.
  restrict_oom_score_adj = true
  disable_apparmor = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = %q
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %q
`, n.store, filepath.Join(n.run, "state"), n.socket(), filepath.Join(n.run, "ttrpc.sock"), pauseImage,
		filepath.Join(n.run, "runc"), filepath.Join(n.state, "cni"))
}

// cniConfig attaches pods to the shared bridge with a per-node address range
// inside one /16, so pods on both nodes reach each other directly.
func (n realNode) cniConfig() string {
	return fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "mpijob",
  "plugins": [
    {
      "type": "bridge",
      "bridge": %q,
      "isGateway": false,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": %q,
        "ranges": [[{"subnet": %q, "rangeStart": "10.244.%d.2", "rangeEnd": "10.244.%d.254", "gateway": %q}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    }
  ]
}
`, bridgeName, filepath.Join(n.state, "ipam"), bridgeCIDR, n.index, n.index, DNSAddress)
}

func (n realNode) kubeletConfig(p *pki.PKI) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
port: 10250
readOnlyPort: 0
healthzBindAddress: %s
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %q}
authorization: {mode: Webhook}
tlsCertFile: %q
tlsPrivateKeyFile: %q
cgroupDriver: cgroupfs
cgroupRoot: /%s
failCgroupV1: false
failSwapOn: false
clusterDNS: [%s]
clusterDomain: %s
containerRuntimeEndpoint: unix://%s
podLogsDir: %q
resolvConf: /etc/resolv.conf
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: "100Mi"
  nodefs.available: "1%%"
  imagefs.available: "1%%"
  nodefs.inodesFree: "1%%"
# Disk pressure on a developer's machine passes as soon as space is freed
# (the default holds the taint for 5 minutes).
evictionPressureTransitionPeriod: 30s
maxPods: 110
nodeStatusUpdateFrequency: 10s
# Pods are synced every 10 s (default 1 m), so a Secret's new content (the
# certificate mpijob-manager's rotator writes at first install) reaches
# its volume within seconds.
syncFrequency: 10s
# The kubelet rotates a container's log past 10 MiB when it looks, every
# 10 s by default: a program writing 5 MB/s left a 60 MB file. Looking every
# 3 s (the shortest the kubelet takes) bounds what one pod's log takes of
# the node's disk.
containerLogMonitorInterval: 3s
enforceNodeAllocatable: [pods]
`, n.addr, n.addr, p.Path("ca", "crt"), p.Path(n.name+"-serving", "crt"), p.Path(n.name+"-serving", "key"),
		n.cgroupRoot(), DNSAddress, clusterDomain, n.socket(), filepath.Join(n.state, "pod-logs"))
}

// cgroupRoot is the node's cgroup, named like the node so Down finds it.
func (n realNode) cgroupRoot() string { return n.name }

func (c *Cluster) startContainerd(ctx context.Context, n realNode) error {
	for _, d := range []string{n.state, n.store, n.run, filepath.Join(n.state, "cni"), filepath.Join(n.state, "pod-logs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	cfg := filepath.Join(n.state, "containerd.toml")
	if err := os.WriteFile(cfg, []byte(n.containerdConfig()), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(n.state, "cni", "10-mpijob.conflist"), []byte(n.cniConfig()), 0o644); err != nil {
		return err
	}
	name := "containerd-" + n.name
	if err := c.startProcess(name, "/usr/bin/containerd", []string{"--config", cfg}, nil); err != nil {
		return err
	}
	return c.waitFor(ctx, name, 60*time.Second, func(context.Context) bool {
		conn, err := net.DialTimeout("unix", n.socket(), time.Second)
		if err == nil {
			_ = conn.Close()
		}
		return err == nil
	})
}

func (c *Cluster) startKubelet(n realNode) error {
	if err := makeCgroupRoot(n.cgroupRoot()); err != nil {
		return err
	}
	cfg := filepath.Join(n.state, "kubelet.yaml")
	if err := os.WriteFile(cfg, []byte(n.kubeletConfig(c.pki)), 0o644); err != nil {
		return err
	}
	args := []string{
		"--config=" + cfg,
		"--kubeconfig=" + c.componentKubeconfig(n.name),
		"--root-dir=" + filepath.Join(n.state, "kubelet"),
		"--hostname-override=" + n.name,
		"--node-ip=" + c.hostIP,
		"--node-labels=" + strings.Join([]string{"mpijob.dev/node-kind=real", "kubernetes.io/os=linux"}, ","),
		"--v=1",
	}
	// Every kubelet binds the device plugin socket at the same fixed path
	// (/var/lib/kubelet/device-plugins/kubelet.sock, not under --root-dir),
	// removing what is there first: two starting at once can both fail
	// with "address already in use" and exit. Start them one at a time,
	// each once the previous one has bound it.
	kubeletStart.Lock()
	defer kubeletStart.Unlock()
	started := time.Now()
	if err := c.startProcess("kubelet-"+n.name, c.opts.bin("kubelet"), args, nil); err != nil {
		return err
	}
	for deadline := started.Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if fi, err := os.Stat(devicePluginSocket); err == nil && !fi.ModTime().Before(started.Truncate(time.Second)) {
			return nil
		}
		if err := c.checkAlive("kubelet-" + n.name); err != nil {
			return err
		}
	}
	return nil
}

// devicePluginSocket is where every kubelet serves device plugins.
const devicePluginSocket = "/var/lib/kubelet/device-plugins/kubelet.sock"

// kubeletStart serializes kubelet starts (see startKubelet).
var kubeletStart sync.Mutex

// waitNodesReady waits until every real node reports Ready.
func (c *Cluster) waitNodesReady(ctx context.Context) error {
	return c.waitFor(ctx, "", 120*time.Second, func(ctx context.Context) bool {
		for i := 1; i <= c.opts.RealNodes; i++ {
			if err := c.checkAlive("kubelet-" + nodeName(i)); err != nil {
				return false
			}
			node, err := c.clientset.CoreV1().Nodes().Get(ctx, nodeName(i), metav1.GetOptions{})
			if err != nil || !nodeReady(node) {
				return false
			}
		}
		return true
	})
}

func nodeReady(n *corev1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}
