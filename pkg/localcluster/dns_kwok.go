package localcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/mpijob/mpijob/pkg/localcluster/toolchain"
)

// corefile serves cluster.local from the API (headless Services are all MPI
// needs: JobSet's hostfile names pods through one) and answers every other
// name NXDOMAIN at once, as this machine has no upstream resolver to reach.
func corefile(kubeconfig string) string {
	return fmt.Sprintf(`%[1]s:53 in-addr.arpa:53 ip6.arpa:53 {
    bind %[2]s
    errors
    kubernetes %[1]s in-addr.arpa ip6.arpa {
        kubeconfig %[3]s
        pods insecure
        ttl 5
        fallthrough in-addr.arpa ip6.arpa
    }
    cache 5
}
.:53 {
    bind %[2]s
    template IN ANY {
        rcode NXDOMAIN
    }
}
`, clusterDomain, DNSAddress, kubeconfig)
}

func (c *Cluster) startDNS(ctx context.Context) error {
	path := c.opts.path("Corefile")
	if err := os.WriteFile(path, []byte(corefile(c.componentKubeconfig("admin"))), 0o644); err != nil {
		return err
	}
	if err := c.startProcess("coredns", c.opts.bin("coredns"), []string{"-conf", path}, nil); err != nil {
		return err
	}
	return c.waitFor(ctx, "coredns", 30*time.Second, func(ctx context.Context) bool {
		r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "udp", DNSAddress+":53")
		}}
		_, err := r.LookupHost(ctx, "kubernetes.default.svc."+clusterDomain)
		return err == nil
	})
}

// moduleDir returns where the Go module cache holds mod, as required by the
// toolchain module tool (downloading it if needed).
func (c *Cluster) moduleDir(ctx context.Context, tool, mod string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", mod)
	cmd.Dir = filepath.Join(c.opts.RepoRoot, "hack", "toolchain", tool)
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("failed to locate module %s (go mod download in %s): %w", mod, cmd.Dir, err)
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out, &info); err != nil || info.Dir == "" {
		return "", fmt.Errorf("failed to locate module %s: %s", mod, info.Error)
	}
	return info.Dir, nil
}

// kwokStages are the stage files (from kwok's module) that drive fake nodes
// and pods: nodes turn Ready and keep a lease, pods start at once, pods of
// Jobs complete, deleted pods go away.
var kwokStages = []string{
	"kustomize/stage/node/fast/node-initialize.yaml",
	"kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
	"kustomize/stage/pod/fast/pod-ready.yaml",
	"kustomize/stage/pod/fast/pod-complete.yaml",
	"kustomize/stage/pod/fast/pod-delete.yaml",
}

func (c *Cluster) startKwok(ctx context.Context) error {
	dir, err := c.moduleDir(ctx, "kwok", "sigs.k8s.io/kwok")
	if err != nil {
		return err
	}
	var docs []string
	for _, s := range kwokStages {
		b, err := os.ReadFile(filepath.Join(dir, s))
		if err != nil {
			return fmt.Errorf("failed to read kwok stage %s: %w", s, err)
		}
		docs = append(docs, strings.TrimSpace(string(b)))
	}
	// mpijob's own stages fake OOM kills and evictions for diagnosis tests.
	own, err := os.ReadFile(filepath.Join(c.opts.RepoRoot, "config", "dev", "kwok", "pod-failures.yaml"))
	if err != nil {
		return fmt.Errorf("failed to read mpijob's kwok stages: %w", err)
	}
	docs = append(docs, strings.TrimSpace(string(own)))
	stages := c.opts.path("kwok-stages.yaml")
	if err := os.WriteFile(stages, []byte(strings.Join(docs, "\n---\n")+"\n"), 0o644); err != nil {
		return err
	}
	args := []string{
		"--kubeconfig=" + c.componentKubeconfig("admin"),
		"-c", stages,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=" + kwokNodeAnnotation + "=fake",
		// With the default lease, fake nodes flap NotReady about every 55 s.
		"--node-lease-duration-seconds=40",
		fmt.Sprintf("--server-address=127.0.0.1:%d", kwokServerPort),
		"--cidr=10.245.0.0/16",
		"--node-ip=10.245.0.1",
	}
	// Create the nodes before kwok runs, so their status is ours to set
	// without racing kwok's node-initialize stage.
	for i := 1; i <= c.opts.KwokNodes; i++ {
		if err := c.createKwokNode(ctx, kwokNodeName(i)); err != nil {
			return err
		}
	}
	if err := c.startProcess("kwok", c.opts.bin("kwok"), args, nil); err != nil {
		return err
	}
	return c.waitFor(ctx, "kwok", 60*time.Second, func(ctx context.Context) bool {
		for i := 1; i <= c.opts.KwokNodes; i++ {
			n, err := c.clientset.CoreV1().Nodes().Get(ctx, kwokNodeName(i), metav1.GetOptions{})
			if err != nil || !nodeReady(n) {
				return false
			}
		}
		return true
	})
}

// KwokNodeCapacity is what every fake node offers.
var KwokNodeCapacity = corev1.ResourceList{
	corev1.ResourceCPU:    resource.MustParse("32"),
	corev1.ResourceMemory: resource.MustParse("256Gi"),
	corev1.ResourcePods:   resource.MustParse("1000"),
	"nvidia.com/gpu":      resource.MustParse("8"),
}

// kwokNode is a fake GPU node: labelled type=kwok and tainted
// nvidia.com/gpu:NoSchedule as GPU nodes of real clusters are, so pods that
// ask for GPUs land there (ExtendedResourceToleration gives them the
// toleration) and CPU pods do not.
func kwokNode(name string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{kwokNodeAnnotation: "fake", "node.alpha.kubernetes.io/ttl": "0"},
			Labels: map[string]string{
				"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
				kwokNodeLabelType: "kwok", "mpijob.dev/node-kind": "kwok", "nvidia.com/gpu.present": "true",
			},
		},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: GPUTaintKey, Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{
			Capacity:    KwokNodeCapacity,
			Allocatable: KwokNodeCapacity,
			NodeInfo:    corev1.NodeSystemInfo{KubeletVersion: "kwok-" + toolchain.KwokVersion, OperatingSystem: "linux", Architecture: "amd64"},
		},
	}
}

func (c *Cluster) createKwokNode(ctx context.Context, name string) error {
	n := kwokNode(name)
	created, err := c.clientset.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		created, err = c.clientset.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	}
	if err != nil {
		return fmt.Errorf("failed to create kwok node %s: %w", name, err)
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := c.clientset.CoreV1().Nodes().Get(ctx, created.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Status.Capacity = n.Status.Capacity
		cur.Status.Allocatable = n.Status.Allocatable
		cur.Status.NodeInfo = n.Status.NodeInfo
		_, err = c.clientset.CoreV1().Nodes().UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("failed to set capacity of kwok node %s: %w", name, err)
	}
	return nil
}
