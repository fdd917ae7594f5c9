package localcluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/mpijob/mpijob/pkg/localcluster/pki"
)

func (c *Cluster) makePKI() error {
	p, err := pki.New(c.opts.pkiDir())
	if err != nil {
		return err
	}
	c.pki = p
	specs := []pki.CertSpec{
		{Name: "apiserver", CN: "kube-apiserver", Server: true,
			DNS: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc." + clusterDomain},
			IPs: []string{"127.0.0.1", "10.96.0.1", c.hostIP}},
		{Name: "admin", CN: "mpijob-admin", Orgs: []string{"system:masters"}, Client: true},
		{Name: "apiserver-kubelet-client", CN: "kube-apiserver-kubelet-client", Orgs: []string{"system:masters"}, Client: true},
		{Name: "controller-manager", CN: "system:kube-controller-manager", Client: true},
		{Name: "scheduler", CN: "system:kube-scheduler", Client: true},
		{Name: "webhooks", CN: "mpijob-local-webhooks", Server: true, DNS: []string{"localhost"}, IPs: []string{"127.0.0.1"}},
		// The API aggregation layer: the API server's client certificate
		// toward extension API servers (Kueue's visibility API), and that
		// server's serving certificate for the name the API server checks.
		{Name: "front-proxy-client", CN: frontProxyClient, Client: true},
		// Trainer's runtime status server, for the name Trainer gives the
		// training pods (its webhook Service's).
		{Name: "trainer-status", CN: trainerStatusHost, Server: true, DNS: []string{trainerStatusHost}, IPs: []string{c.hostIP}},
		{Name: "kueue-visibility", CN: kueueVisibilityService + ".kueue-system.svc", Server: true,
			DNS: []string{kueueVisibilityService + ".kueue-system.svc"}, IPs: []string{c.hostIP}},
	}
	for i := 1; i <= c.opts.RealNodes; i++ {
		n := nodeName(i)
		specs = append(specs,
			pki.CertSpec{Name: n, CN: "system:node:" + n, Orgs: []string{"system:nodes"}, Client: true},
			pki.CertSpec{Name: n + "-serving", CN: n, DNS: []string{n}, IPs: []string{nodeAddress(i), c.hostIP}, Server: true})
	}
	for _, s := range specs {
		if err := p.Issue(s); err != nil {
			return err
		}
	}
	if err := p.ServiceAccountKey(); err != nil {
		return err
	}
	tokens, err := writeTokens(p.Path("tokens", "csv"))
	if err != nil {
		return err
	}
	for _, name := range []string{"admin", "controller-manager", "scheduler"} {
		if err := writeCertKubeconfig(c.opts.path("kubeconfigs", name+".kubeconfig"), p, name); err != nil {
			return err
		}
	}
	for i := 1; i <= c.opts.RealNodes; i++ {
		if err := writeCertKubeconfig(c.opts.path("kubeconfigs", nodeName(i)+".kubeconfig"), p, nodeName(i)); err != nil {
			return err
		}
	}
	return writeUserKubeconfig(c.opts.KubeconfigPath(), p, tokens)
}

func (c *Cluster) componentKubeconfig(name string) string {
	return c.opts.path("kubeconfigs", name+".kubeconfig")
}

func (c *Cluster) startEtcd(ctx context.Context) error {
	data := c.opts.path("etcd")
	_ = os.RemoveAll(data)
	client := fmt.Sprintf("http://127.0.0.1:%d", etcdClientPort)
	peer := fmt.Sprintf("http://127.0.0.1:%d", etcdPeerPort)
	args := []string{
		"--name=mpijob", "--data-dir=" + data,
		"--listen-client-urls=" + client, "--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=mpijob=" + peer,
		// A development cluster trades durability for speed: nothing in it
		// must survive a crash of this machine.
		"--unsafe-no-fsync", "--quota-backend-bytes=4294967296",
		"--log-level=warn",
	}
	if err := c.startProcess("etcd", c.opts.bin("etcd"), args, nil); err != nil {
		return err
	}
	return c.waitFor(ctx, "etcd", 60*time.Second, func(context.Context) bool {
		conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", etcdClientPort), time.Second)
		if err == nil {
			_ = conn.Close()
		}
		return err == nil
	})
}

func (c *Cluster) startAPIServer(ctx context.Context) error {
	p := c.pki
	args := []string{
		"--etcd-servers=" + fmt.Sprintf("http://127.0.0.1:%d", etcdClientPort),
		"--secure-port=" + strconv.Itoa(APIServerPort),
		// All addresses: pods reach the API through the kubernetes
		// Service (10.96.0.1 -> the host's address, by kube-proxy).
		"--bind-address=0.0.0.0",
		"--advertise-address=" + c.hostIP,
		"--tls-cert-file=" + p.Path("apiserver", "crt"),
		"--tls-private-key-file=" + p.Path("apiserver", "key"),
		"--client-ca-file=" + p.Path("ca", "crt"),
		"--token-auth-file=" + p.Path("tokens", "csv"),
		"--service-account-issuer=https://kubernetes.default.svc." + clusterDomain,
		"--service-account-key-file=" + p.Path("sa", "pub"),
		"--service-account-signing-key-file=" + p.Path("sa", "key"),
		"--service-cluster-ip-range=" + serviceCIDR,
		"--authorization-mode=Node,RBAC",
		"--kubelet-preferred-address-types=Hostname,InternalIP",
		"--kubelet-client-certificate=" + p.Path("apiserver-kubelet-client", "crt"),
		"--kubelet-client-key=" + p.Path("apiserver-kubelet-client", "key"),
		"--enable-admission-plugins=NodeRestriction,ExtendedResourceToleration",
		// Who created, changed and deleted MPI jobs (config/audit).
		"--audit-policy-file=" + filepath.Join(c.opts.RepoRoot, "config", "audit", "policy.yaml"),
		"--audit-log-path=" + c.opts.AuditLogPath(),
		"--audit-log-maxsize=100", "--audit-log-maxbackup=3", "--audit-log-format=json",
		// The aggregation layer, for Kueue's visibility API. Extension API
		// servers run as host processes, so the API server dials their
		// endpoints directly instead of a Service's ClusterIP.
		"--requestheader-client-ca-file=" + p.Path("ca", "crt"),
		"--requestheader-allowed-names=" + frontProxyClient,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + p.Path("front-proxy-client", "crt"),
		"--proxy-client-key-file=" + p.Path("front-proxy-client", "key"),
		"--enable-aggregator-routing=true",
		"--allow-privileged=true",
		"--profiling=" + strconv.FormatBool(c.opts.APIServerProfiling),
		"--max-requests-inflight=800",
		"--max-mutating-requests-inflight=400",
		"--event-ttl=2h",
		"--shutdown-delay-duration=0s",
		"--v=1",
	}
	if err := c.startProcess("kube-apiserver", c.opts.bin("kube-apiserver"), args, nil); err != nil {
		return err
	}
	return c.waitFor(ctx, "kube-apiserver", 90*time.Second, func(ctx context.Context) bool {
		return c.apiReady(ctx)
	})
}

func (c *Cluster) startControllerManager() error {
	kc := c.componentKubeconfig("controller-manager")
	p := c.pki
	args := []string{
		"--kubeconfig=" + kc, "--authentication-kubeconfig=" + kc, "--authorization-kubeconfig=" + kc,
		"--bind-address=127.0.0.1", "--leader-elect=false",
		"--service-account-private-key-file=" + p.Path("sa", "key"),
		"--root-ca-file=" + p.Path("ca", "crt"),
		"--use-service-account-credentials=true",
		"--cluster-signing-cert-file=" + p.Path("ca", "crt"),
		"--cluster-signing-key-file=" + p.Path("ca", "key"),
		"--service-cluster-ip-range=" + serviceCIDR,
		// Pod creation speed is set by this client's QPS: 20 (default)
		// takes 12 s for 256 workers, 100 takes 4 s.
		"--kube-api-qps=100", "--kube-api-burst=200",
		"--concurrent-job-syncs=10",
		"--v=1",
	}
	return c.startProcess("kube-controller-manager", c.opts.bin("kube-controller-manager"), args, nil)
}

func (c *Cluster) startScheduler() error {
	kc := c.componentKubeconfig("scheduler")
	args := []string{
		"--kubeconfig=" + kc, "--authentication-kubeconfig=" + kc, "--authorization-kubeconfig=" + kc,
		"--bind-address=127.0.0.1", "--leader-elect=false", "--v=1",
	}
	return c.startProcess("kube-scheduler", c.opts.bin("kube-scheduler"), args, nil)
}

// hostIP is the address of the interface that holds the default route; the
// apiserver advertises it and kubelets register it as their InternalIP.
func hostIP() (string, error) {
	b, err := os.ReadFile("/proc/net/route")
	if err == nil {
		var iface string
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) > 2 && f[1] == "00000000" {
				iface = f[0]
				break
			}
		}
		if iface != "" {
			if ifc, err := net.InterfaceByName(iface); err == nil {
				addrs, _ := ifc.Addrs()
				for _, a := range addrs {
					if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
						return ipn.IP.String(), nil
					}
				}
			}
		}
	}
	ifaces, _ := net.Interfaces()
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagLoopback != 0 || ifc.Flags&net.FlagUp == 0 || ifc.Name == bridgeName {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
				return ipn.IP.String(), nil
			}
		}
	}
	return "", fmt.Errorf("no non-loopback IPv4 address on this machine: kubelets need one to register as their node address")
}
