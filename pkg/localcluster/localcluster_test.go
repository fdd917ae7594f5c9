package localcluster

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestRepointWebhooks(t *testing.T) {
	in := func() *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
			"metadata": map[string]any{"name": "mutating-webhook-configuration"},
			"webhooks": []any{
				map[string]any{
					"name":         "mjobset.kb.io",
					"clientConfig": map[string]any{"service": map[string]any{"name": "webhook-service", "path": "/mutate-jobset"}},
					"rules":        []any{map[string]any{"resources": []any{"jobsets"}}},
				},
				map[string]any{
					"name":         "mpod.kb.io",
					"clientConfig": map[string]any{"service": map[string]any{"name": "webhook-service", "path": "/mutate--v1-pod"}},
					"rules":        []any{map[string]any{"resources": []any{"pods"}}},
				},
			},
		}}
	}
	ca := []byte("CA")
	cases := map[string]struct {
		prefix        string
		wantName      string
		wantURLs      []string
		wantPodScoped bool
	}{
		"jobset pod webhooks get an objectSelector": {
			prefix: "jobset-", wantName: "jobset-mutating-webhook-configuration",
			wantURLs:      []string{"https://127.0.0.1:9444/mutate-jobset", "https://127.0.0.1:9444/mutate--v1-pod"},
			wantPodScoped: true,
		},
		"trainer webhooks keep their scope": {
			prefix: "trainer-", wantName: "trainer-mutating-webhook-configuration",
			wantURLs: []string{"https://127.0.0.1:9444/mutate-jobset", "https://127.0.0.1:9444/mutate--v1-pod"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := in()
			if err := repointWebhooks(o, tc.prefix, 9444, ca); err != nil {
				t.Fatal(err)
			}
			if o.GetName() != tc.wantName {
				t.Errorf("name = %s, want %s", o.GetName(), tc.wantName)
			}
			hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
			var urls []string
			for _, h := range hooks {
				hm := h.(map[string]any)
				url, _, _ := unstructured.NestedString(hm, "clientConfig", "url")
				urls = append(urls, url)
				if _, svc, _ := unstructured.NestedMap(hm, "clientConfig", "service"); svc {
					t.Errorf("webhook %s still names a service", hm["name"])
				}
				if got := hm["clientConfig"].(map[string]any)["caBundle"]; got != base64.StdEncoding.EncodeToString(ca) {
					t.Errorf("caBundle = %v", got)
				}
				_, scoped := hm["objectSelector"]
				if isPod := hm["name"] == "mpod.kb.io"; scoped != (isPod && tc.wantPodScoped) {
					t.Errorf("webhook %s objectSelector present = %v", hm["name"], scoped)
				}
			}
			if diff := cmp.Diff(tc.wantURLs, urls); diff != "" {
				t.Errorf("urls (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestKwokNode(t *testing.T) {
	n := kwokNode("kwok-gpu-01")
	if got := n.Annotations["kwok.x-k8s.io/node"]; got != "fake" {
		t.Errorf("annotation kwok.x-k8s.io/node = %q, want fake (kwok manages only annotated nodes)", got)
	}
	wantTaint := []corev1.Taint{{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}}
	if diff := cmp.Diff(wantTaint, n.Spec.Taints); diff != "" {
		t.Errorf("taints (-want,+got):\n%s", diff)
	}
	gpu := n.Status.Capacity["nvidia.com/gpu"]
	cpu := n.Status.Capacity[corev1.ResourceCPU]
	mem := n.Status.Capacity[corev1.ResourceMemory]
	if gpu.String() != "8" || cpu.String() != "32" || mem.String() != "256Gi" {
		t.Errorf("capacity gpu=%s cpu=%s memory=%s, want 8, 32, 256Gi", gpu.String(), cpu.String(), mem.String())
	}
	if n.Labels["type"] != "kwok" {
		t.Errorf("label type = %q, want kwok", n.Labels["type"])
	}
}

func TestCorefileServesClusterDomainAndRefusesTheRest(t *testing.T) {
	cf := corefile("/k/admin.kubeconfig")
	for _, want := range []string{
		"cluster.local:53 in-addr.arpa:53 ip6.arpa:53 {",
		"bind " + DNSAddress,
		"kubeconfig /k/admin.kubeconfig",
		"pods insecure",
		".:53 {",
		"rcode NXDOMAIN",
	} {
		if !strings.Contains(cf, want) {
			t.Errorf("Corefile lacks %q:\n%s", want, cf)
		}
	}
}

// The local cluster's CoreDNS is built with only the plugins main.go
// imports; a directive the Corefile names without its plugin stops CoreDNS
// at start ("unknown directive").
func TestCorefileDirectivesAreBuiltIn(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "..", "hack", "toolchain", "coredns", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	depth, seen := 0, 0
	for _, line := range strings.Split(corefile("/k/admin.kubeconfig"), "\n") {
		fields := strings.Fields(line)
		if len(fields) > 0 && depth == 1 && fields[0] != "}" {
			seen++
			if imp := `"github.com/coredns/coredns/plugin/` + fields[0] + `"`; !strings.Contains(string(src), imp) {
				t.Errorf("the Corefile uses %q, but hack/toolchain/coredns/main.go does not import %s", fields[0], imp)
			}
		}
		depth += strings.Count(line, "{") - strings.Count(line, "}")
	}
	if seen < 5 {
		t.Fatalf("found %d directives in the Corefile, want at least 5 (bind, errors, kubernetes, cache, template)", seen)
	}
}

// On a first run, what a first job does not need is started after it:
// the parts Up leaves to Finish, the deferred ones first.
func TestFollowing(t *testing.T) {
	cases := map[string]struct {
		deferred     map[string]bool
		kwok         int
		wantDeferred []string
	}{
		"warm: nothing deferred": {
			deferred: map[string]bool{}, kwok: 16,
		},
		"first run: both deferred": {
			deferred: map[string]bool{"kube-router": true, "kwok": true}, kwok: 16,
			wantDeferred: []string{"NetworkPolicy enforcement (kube-router)", "the fake GPU nodes (kwok)"},
		},
		"only kwok deferred": {
			deferred: map[string]bool{"kwok": true}, kwok: 16,
			wantDeferred: []string{"the fake GPU nodes (kwok)"},
		},
		"no kwok nodes asked for": {
			deferred: map[string]bool{"kube-router": true, "kwok": true}, kwok: 0,
			wantDeferred: []string{"NetworkPolicy enforcement (kube-router)"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := &Cluster{opts: Options{KwokNodes: tc.kwok}, deferred: tc.deferred}
			if diff := cmp.Diff(tc.wantDeferred, c.deferredParts()); diff != "" {
				t.Errorf("deferredParts (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(append(tc.wantDeferred, laterParts...), c.Following()); diff != "" {
				t.Errorf("Following (-want +got):\n%s", diff)
			}
		})
	}
}

func TestUnescapeMount(t *testing.T) {
	if got := unescapeMount(`/a\040b/c`); got != "/a b/c" {
		t.Errorf("got %q", got)
	}
}

func TestProgressReportsLongSteps(t *testing.T) {
	old := heartbeat
	heartbeat = 20 * time.Millisecond
	defer func() { heartbeat = old }()
	var buf syncBuffer
	p := NewProgress(&buf)
	done := p.Step("building %s", "things")
	// Wait for a heartbeat (not for a time that should hold one).
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(buf.String(), "still running") && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	done()
	done() // a second call must not print twice
	out := buf.String()
	for _, want := range []string{"[  1] 0m00s  building things ...", "building things: still running", "building things: done in"} {
		if !strings.Contains(out, want) {
			t.Errorf("progress output lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "done in"); n != 1 {
		t.Errorf("done printed %d times, want 1:\n%s", n, out)
	}
	before := strings.Count(out, "still running")
	// Nothing may happen now: three heartbeats' time shows none came.
	time.Sleep(3 * heartbeat)
	if after := strings.Count(buf.String(), "still running"); after != before {
		t.Errorf("heartbeat went on after the step was done")
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestCheckPortsNamesTheBusyPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	busy := l.Addr().String()
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	freeAddr := free.Addr().String()
	_ = free.Close()

	if err := checkPorts([]portUse{{freeAddr, "free thing"}}); err != nil {
		t.Errorf("free port: got %v, want nil", err)
	}
	err = checkPorts([]portUse{{freeAddr, "free thing"}, {busy, "kube-apiserver"}})
	if err == nil {
		t.Fatal("busy port: got nil error")
	}
	port := busy[strings.LastIndex(busy, ":")+1:]
	for _, want := range []string{"port " + busy + " (for kube-apiserver) is busy", "sport = :" + port, "make dev-down"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("error is not one line: %q", err)
	}
}

func TestWaitFinished(t *testing.T) {
	// A pid that no process has: a child that ended and was reaped.
	done := exec.Command("true")
	if err := done.Run(); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		state   *stateFile
		wantErr string
	}{
		"nothing pending":          {state: &stateFile{OwnerPID: os.Getpid()}},
		"no cluster":               {wantErr: "is not running: start it with `make dev`"},
		"its up ended first":       {state: &stateFile{OwnerPID: done.Process.Pid, Pending: []string{"Prometheus"}}, wantErr: fmt.Sprintf("mpijob-dev up (pid %d) ended before it started Prometheus: run `make dev-down`, then `make dev`", done.Process.Pid)},
		"still pending at the end": {state: &stateFile{OwnerPID: os.Getpid(), Pending: []string{"the log store (Loki)", "Prometheus"}}, wantErr: "still waits for the log store (Loki), Prometheus"},
	} {
		t.Run(name, func(t *testing.T) {
			opts := Options{StateDir: t.TempDir()}
			if tc.state != nil {
				b, err := json.Marshal(tc.state)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(opts.StateDir, "state.json"), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var out strings.Builder
			err := WaitFinished(context.Background(), opts, &out, 100*time.Millisecond)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("WaitFinished: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("WaitFinished = %v, want an error with %q", err, tc.wantErr)
			}
		})
	}
}

// The API server serves profiles only when asked (bench/scale's
// -apiserver-profiles); a value other than 1 leaves them off.
func TestAPIServerProfilingIsOptIn(t *testing.T) {
	for value, want := range map[string]bool{"": false, "1": true, "true": false, "0": false} {
		t.Setenv("MPIJOB_APISERVER_PROFILING", value)
		opts, err := DefaultOptions(".")
		if err != nil {
			t.Fatal(err)
		}
		if opts.APIServerProfiling != want {
			t.Errorf("MPIJOB_APISERVER_PROFILING=%q: profiling %v, want %v", value, opts.APIServerProfiling, want)
		}
	}
}
