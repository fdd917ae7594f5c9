package localcluster

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The pod network is one Linux bridge shared by both real nodes. Two host
// processes make it behave like a real cluster's:
//   - kube-proxy (iptables mode) gives Services working ClusterIPs;
//   - kube-router, with only its network policy controller on (no routing,
//     no service proxy, no CNI), enforces NetworkPolicies with iptables and
//     ipsets. Traffic between pods on the bridge passes through the host's
//     iptables because br_netfilter is on (net.bridge.bridge-nf-call-iptables).
//
// Both real nodes register the host's address, and kube-router treats every
// pod whose hostIP is its node's address as its own, so one kube-router
// (named after node 1) guards the pods of both nodes.

// ensureBridgeNetfilter makes bridged pod-to-pod traffic visible to
// iptables, without which neither Services nor policies apply on the bridge.
func ensureBridgeNetfilter() error {
	const knob = "/proc/sys/net/bridge/bridge-nf-call-iptables"
	if _, err := os.Stat(knob); err != nil {
		// The module may be there but not loaded.
		_ = exec.Command("modprobe", "br_netfilter").Run()
	}
	if err := os.WriteFile(knob, []byte("1"), 0o644); err != nil {
		return fmt.Errorf("NetworkPolicies and Services need br_netfilter (%s): %w; load it with `modprobe br_netfilter` (a VM or a privileged container with the host's modules)", knob, err)
	}
	_ = os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644)
	return nil
}

func (c *Cluster) startKubeProxy(ctx context.Context) error {
	args := []string{
		"--kubeconfig=" + c.componentKubeconfig("admin"),
		"--hostname-override=" + nodeName(1),
		"--proxy-mode=iptables",
		"--cluster-cidr=" + bridgeCIDR,
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--healthz-bind-address=127.0.0.1:%d", kubeProxyHealthPort),
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", kubeProxyMetricsPort),
		// conntrack limits are the host's business, not a test cluster's.
		"--conntrack-max-per-core=0",
		"--v=1",
	}
	if err := c.startProcess("kube-proxy", c.opts.bin("kube-proxy"), args, nil); err != nil {
		return err
	}
	return c.waitFor(ctx, "kube-proxy", 60*time.Second, func(ctx context.Context) bool {
		return httpOK(ctx, fmt.Sprintf("http://127.0.0.1:%d/healthz", kubeProxyHealthPort))
	})
}

func (c *Cluster) startNetworkPolicy(ctx context.Context) error {
	// kube-router reads its node object at start and exits without it.
	if err := c.waitFor(ctx, "kube-apiserver", 60*time.Second, func(ctx context.Context) bool {
		_, err := c.clientset.CoreV1().Nodes().Get(ctx, nodeName(1), metav1.GetOptions{})
		return err == nil
	}); err != nil {
		return fmt.Errorf("node %s did not register: %w", nodeName(1), err)
	}
	if err := c.startProcess("kube-router", c.opts.bin("kube-router"), kubeRouterArgs(c.componentKubeconfig("admin")), nil); err != nil {
		return err
	}
	return c.waitFor(ctx, "kube-router", 60*time.Second, func(ctx context.Context) bool {
		return httpOK(ctx, fmt.Sprintf("http://127.0.0.1:%d/healthz", kubeRouterHealthPort))
	})
}

func kubeRouterArgs(kubeconfig string) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--hostname-override=" + nodeName(1),
		"--run-firewall=true",
		"--run-router=false",
		"--run-service-proxy=false",
		"--run-loadbalancer=false",
		"--enable-cni=false",
		"--enable-ipv6=false",
		"--service-cluster-ip-range=" + serviceCIDR,
		fmt.Sprintf("--health-port=%d", kubeRouterHealthPort),
		"--metrics-port=0",
		"--v=1",
	}
}

// cleanupNetwork removes the iptables chains and ipsets that kube-proxy and
// kube-router left (they keep them on exit, as a node's would survive a
// restart). kube-proxy knows its own rules; kube-router v2.1's
// --cleanup-config leaves its policy chains in place and then panics in its
// service proxy's cleanup, so its rules are removed here by name.
func cleanupNetwork(opts Options) {
	if bin := opts.bin("kube-proxy"); fileExists(bin) {
		_ = exec.Command(bin, "--cleanup", "--proxy-mode=iptables").Run()
	}
	out, err := exec.Command("iptables-save", "-t", "filter").Output()
	if err == nil && strings.Contains(string(out), "KUBE-ROUTER-") {
		var keep []string
		for _, l := range strings.Split(string(out), "\n") {
			if !isKubeRouterRule(l) {
				keep = append(keep, l)
			}
		}
		cmd := exec.Command("iptables-restore")
		cmd.Stdin = strings.NewReader(strings.Join(keep, "\n"))
		_ = cmd.Run()
	}
	if out, err := exec.Command("ipset", "list", "-n").Output(); err == nil {
		for _, name := range strings.Fields(string(out)) {
			if isKubeRouterRule(name) {
				_ = exec.Command("ipset", "destroy", name).Run()
			}
		}
	}
}

// isKubeRouterRule reports whether an iptables-save line or an ipset name
// belongs to kube-router's policy controller.
func isKubeRouterRule(s string) bool {
	for _, p := range []string{"KUBE-ROUTER-", "KUBE-POD-FW-", "KUBE-NWPLCY-", "KUBE-SRC-", "KUBE-DST-", "kube-router-"} {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

func httpOK(ctx context.Context, url string) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
