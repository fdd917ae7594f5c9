package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// registryDBPort is the model registry's PostgreSQL, on loopback.
	registryDBPort = 9466
	// registryPort is the model registry's REST API, on loopback: only
	// its gateway reaches it.
	registryPort = 9467
	// RegistryPort is the registry's gateway, on the pod network's bridge:
	// callers with a token the API server says may use the registry's
	// Service (config/dev/model-registry.yaml) get through, as behind
	// OpenShift AI's kube-rbac-proxy. Pods reach it through the Service.
	RegistryPort = 9468
	// RegistryGatewayProcess is the gateway's host process.
	RegistryGatewayProcess = "registry-gateway"
	// RegistryNamespace is the registry's Service's namespace.
	RegistryNamespace = "model-registry"
	// RegistryService is the registry's Service.
	RegistryService = "model-registry"
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
	if tcpOpen(fmt.Sprintf("127.0.0.1:%d", registryDBPort)) {
		return c.startRegistryServer(ctx)
	}
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
	return c.startRegistryServer(ctx)
}

// startRegistryServer starts the registry's server and its gateway, each
// unless it runs.
func (c *Cluster) startRegistryServer(ctx context.Context) error {
	if !httpOK(ctx, fmt.Sprintf("http://127.0.0.1:%d/readyz/health", registryPort)) {
		if err := c.startRegistryProcess(ctx); err != nil {
			return err
		}
	}
	if tcpOpen(fmt.Sprintf("%s:%d", DNSAddress, RegistryPort)) {
		return nil
	}
	self, err := devExecutable(c.opts)
	if err != nil {
		return err
	}
	if err := c.startProcess(RegistryGatewayProcess, self, []string{RegistryGatewayProcess}, []string{"MPIJOB_CACHE_DIR=" + c.opts.CacheDir}); err != nil {
		return err
	}
	return c.waitFor(ctx, RegistryGatewayProcess, 60*time.Second, func(ctx context.Context) bool {
		return httpOK(ctx, RegistryURL+"/readyz/health")
	})
}

// startRegistryProcess starts the registry's server.
func (c *Cluster) startRegistryProcess(ctx context.Context) error {
	if err := c.startProcess("model-registry", c.opts.bin("model-registry"), []string{"proxy",
		"--hostname", "127.0.0.1", "--port", fmt.Sprint(registryPort),
		"--embedmd-database-type", "postgres", "--embedmd-database-dsn", registryDBDSN}, nil); err != nil {
		return err
	}
	return c.waitFor(ctx, "model-registry", 120*time.Second, func(ctx context.Context) bool {
		return httpOK(ctx, fmt.Sprintf("http://127.0.0.1:%d/readyz/health", registryPort))
	})
}

// StopModelRegistry stops the running cluster's model registry server (its
// gateway and database keep running and answer that it is down): what a
// test of a registry that is down does.
func StopModelRegistry(opts Options) {
	stopPidFiles(opts.runDir(), 10*time.Second, func(name string) bool { return name == "model-registry" })
}

// StartModelRegistry starts what of the running cluster's model registry
// is not running (`mpijob-dev reload` restarts its gateway with this
// checkout).
func StartModelRegistry(ctx context.Context, opts Options, out io.Writer) error {
	return New(runningCacheDir(opts), out).startModelRegistry(ctx)
}

// ServeRegistryGateway is `mpijob-dev registry-gateway`: the model
// registry's gateway on the bridge. Like OpenShift AI's kube-rbac-proxy in
// front of a registry, it takes the caller's bearer token, asks the API
// server who it is (TokenReview) and whether they may use the registry's
// Service (SubjectAccessReview on services/proxy: get to read; create,
// update or patch to write, as the method says), and only then passes
// the request on. The token is not passed on.
func ServeRegistryGateway(ctx context.Context, opts Options, out io.Writer) error {
	cs, err := opts.clientset()
	if err != nil {
		return err
	}
	target, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", registryPort))
	proxy := httputil.NewSingleHostReverseProxy(target)
	verbs := map[string]string{http.MethodGet: "get", http.MethodHead: "get", http.MethodPost: "create", http.MethodPut: "update", http.MethodPatch: "patch"}
	srv := &http.Server{
		Addr:              fmt.Sprintf("%s:%d", DNSAddress, RegistryPort),
		ReadHeaderTimeout: 10 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/readyz/health" {
				proxy.ServeHTTP(w, r)
				return
			}
			token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || strings.TrimSpace(token) == "" {
				http.Error(w, "the model registry takes a bearer token: your Kubernetes token (kubectl mpijob register sends your kubeconfig's)", http.StatusUnauthorized)
				return
			}
			verb, ok := verbs[r.Method]
			if !ok {
				http.Error(w, "method "+r.Method+" is not served", http.StatusMethodNotAllowed)
				return
			}
			tr, err := cs.AuthenticationV1().TokenReviews().Create(r.Context(), &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: strings.TrimSpace(token)}}, metav1.CreateOptions{})
			if err != nil {
				http.Error(w, "the API server could not review the token: "+err.Error(), http.StatusBadGateway)
				return
			}
			if !tr.Status.Authenticated {
				http.Error(w, "the API server does not know this token", http.StatusUnauthorized)
				return
			}
			u := tr.Status.User
			extra := map[string]authorizationv1.ExtraValue{}
			for k, v := range u.Extra {
				extra[k] = authorizationv1.ExtraValue(v)
			}
			sar, err := cs.AuthorizationV1().SubjectAccessReviews().Create(r.Context(), &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: u.Username, Groups: u.Groups, UID: u.UID, Extra: extra,
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: RegistryNamespace, Verb: verb, Resource: "services", Subresource: "proxy", Name: RegistryService},
			}}, metav1.CreateOptions{})
			if err != nil {
				http.Error(w, "the API server could not review the access: "+err.Error(), http.StatusBadGateway)
				return
			}
			if !sar.Status.Allowed {
				http.Error(w, fmt.Sprintf("%s may not %s the model registry (services/proxy %s/%s)", u.Username, verb, RegistryNamespace, RegistryService), http.StatusForbidden)
				return
			}
			r.Header.Del("Authorization")
			proxy.ServeHTTP(w, r)
		}),
	}
	ln, err := listenUntilDone(ctx, srv)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "registry-gateway: serving the model registry on %s to callers the API server lets use services/proxy %s/%s\n", srv.Addr, RegistryNamespace, RegistryService)
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// listenUntilDone listens on srv's address and closes srv when ctx ends:
// the host processes' gateways.
func listenUntilDone(ctx context.Context, srv *http.Server) (net.Listener, error) {
	ln, err := net.Listen("tcp", srv.Addr)
	if err != nil {
		return nil, err
	}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	return ln, nil
}

// devExecutable is mpijob-dev, which serves the local cluster's host
// processes: this executable, or the checkout's bin/mpijob-dev when this
// is another (a test that starts a part again).
func devExecutable(opts Options) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	if filepath.Base(self) == "mpijob-dev" {
		return self, nil
	}
	dev := filepath.Join(opts.RepoRoot, "bin", "mpijob-dev")
	if _, err := os.Stat(dev); err != nil {
		return "", fmt.Errorf("%s is not built (make bin/mpijob-dev): %w", dev, err)
	}
	return dev, nil
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
