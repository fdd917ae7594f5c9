package localcluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/certs"
)

// What tests and benches need to act on the release install's
// mpijob-manager: which pod leads, its process on this machine (pods share
// the host's kernel), its metrics, and scaling the Deployment.

// managerSelector selects the manager's pods.
var managerSelector = client.MatchingLabels{"app.kubernetes.io/name": ManagerDeployment}

// ManagerLeader returns the name of the pod that holds the manager's
// leader Lease (controller-runtime's identity is hostname_uuid, and a
// pod's hostname is its name), or "" when none does.
func ManagerLeader(ctx context.Context, cs kubernetes.Interface) (string, error) {
	l, err := cs.CoordinationV1().Leases(api.ManagerLeaseNamespace).Get(ctx, api.ManagerLeaseName, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	if l.Spec.HolderIdentity == nil {
		return "", nil
	}
	pod, _, _ := strings.Cut(*l.Spec.HolderIdentity, "_")
	return pod, nil
}

// ManagerPods returns the manager's pods that are not being deleted.
func ManagerPods(ctx context.Context, cl client.Client) ([]corev1.Pod, error) {
	l := &corev1.PodList{}
	if err := cl.List(ctx, l, client.InNamespace(ManagerNamespace), managerSelector); err != nil {
		return nil, err
	}
	var pods []corev1.Pod
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil {
			pods = append(pods, p)
		}
	}
	return pods, nil
}

// ScaleManager sets the manager Deployment's replicas and waits: for 0,
// until no manager pod is left (the webhooks then have no endpoint); else
// until the rollout is complete.
func ScaleManager(ctx context.Context, cl client.Client, replicas int32, timeout time.Duration) error {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ManagerNamespace, Name: ManagerDeployment}}
	patch := client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas))
	if err := cl.Patch(ctx, d, patch); err != nil {
		return fmt.Errorf("scale Deployment %s/%s to %d: %w", ManagerNamespace, ManagerDeployment, replicas, err)
	}
	if replicas > 0 {
		return WaitRollout(ctx, cl, ManagerNamespace, ManagerDeployment, timeout)
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		l := &corev1.PodList{}
		return cl.List(ctx, l, client.InNamespace(ManagerNamespace), managerSelector) == nil && len(l.Items) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("manager pods still exist %s after scaling to 0", timeout)
	}
	return nil
}

// DeleteManagerPod deletes one manager pod; grace 0 kills it at once.
func DeleteManagerPod(ctx context.Context, cl client.Client, pod string, grace *int64) error {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ManagerNamespace, Name: pod}}
	opts := []client.DeleteOption{}
	if grace != nil {
		opts = append(opts, client.GracePeriodSeconds(*grace))
	}
	return cl.Delete(ctx, p, opts...)
}

// ManagerPID finds the process of the manager pod on this machine: the
// one whose command is /mpijob-manager and whose HOSTNAME (the kubelet
// sets it to the pod's name) is pod.
func ManagerPID(pod string) (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.HasPrefix(cmd, []byte("/"+ManagerDeployment+"\x00")) {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if string(kv) == "HOSTNAME="+pod {
				return pid, nil
			}
		}
	}
	return 0, fmt.Errorf("no process of manager pod %s on this machine", pod)
}

// ManagerMetrics returns the metrics URL of a manager pod and a TLS
// configuration that checks its certificate against the manager's own CA
// (the Secret its rotator keeps) under the metrics Service's name.
func ManagerMetrics(ctx context.Context, cl client.Client, pod string) (string, *tls.Config, error) {
	p := &corev1.Pod{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ManagerNamespace, Name: pod}, p); err != nil {
		return "", nil, err
	}
	if p.Status.PodIP == "" {
		return "", nil, fmt.Errorf("manager pod %s has no IP yet", pod)
	}
	port := int32(0)
	for _, c := range p.Spec.Containers {
		for _, cp := range c.Ports {
			if cp.Name == "metrics" {
				port = cp.ContainerPort
			}
		}
	}
	if port == 0 {
		return "", nil, fmt.Errorf("manager pod %s has no port named metrics", pod)
	}
	sec := &corev1.Secret{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ManagerNamespace, Name: certs.SecretName}, sec); err != nil {
		return "", nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(sec.Data["ca.crt"]) {
		return "", nil, errors.New("the manager's Secret holds no CA certificate")
	}
	return fmt.Sprintf("https://%s:%d/metrics", p.Status.PodIP, port),
		&tls.Config{RootCAs: pool, ServerName: managerMetricsName, MinVersion: tls.VersionTLS12}, nil
}

// GraceNow is a zero grace period: the pod is killed at once.
var GraceNow = ptr.To[int64](0)

// managerMetricsName is the name mpijob-manager's certificate has for its
// metrics: the Service's.
var managerMetricsName = certs.MetricsServiceName + "." + ManagerNamespace + ".svc"

// ProcessUse reads a process's CPU time (user+system) and its current and
// peak resident memory from /proc.
func ProcessUse(pid int) (cpu time.Duration, rss, peak int64, err error) {
	if _, cpu, err = ProcessCPU(pid); err != nil {
		return 0, 0, 0, err
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, 0, err
	}
	for _, l := range strings.Split(string(status), "\n") {
		fs := strings.Fields(l)
		if len(fs) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(fs[1], 10, 64)
		switch fs[0] {
		case "VmRSS:":
			rss = v * 1024
		case "VmHWM:":
			peak = v * 1024
		}
	}
	return cpu, rss, peak, nil
}

// ProcessCPU reads a process's program name and CPU time (user+system)
// from /proc/PID/stat.
func ProcessCPU(pid int) (comm string, cpu time.Duration, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", 0, err
	}
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open || end+2 > len(s) {
		return "", 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(s[end+2:])
	if len(f) < 13 {
		return "", 0, fmt.Errorf("/proc/%d/stat: %d fields after the name, want at least 13", pid, len(f))
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return s[open+1 : end], time.Duration(ut+st) * time.Second / 100, nil // USER_HZ
}
