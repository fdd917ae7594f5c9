package main

import (
	"flag"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The dashboard's flags are its own: a package it imports that registers
// flags of the same name at init (controller-runtime's --kubeconfig, which
// the manager's controllers bring) panics the binary before it starts, as
// it once did in the cluster. A test of this package runs that init.
func TestFlagsAreTheDashboards(t *testing.T) {
	for _, name := range []string{"kubeconfig", "listen"} {
		if flag.Lookup(name) != nil {
			t.Errorf("flag --%s is registered at init by an imported package, before the dashboard defines its own", name)
		}
	}
}

const kubeconfigYAML = `apiVersion: v1
kind: Config
clusters:
- name: local
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: dev-b
  user: {token: tok-b}
- name: dev-a
  user: {token: tok-a}
- name: admin
  user: {client-certificate-data: ""}
contexts:
- name: admin
  context: {cluster: local, user: admin}
- name: dev-a
  context: {cluster: local, user: dev-a}
current-context: admin
`

// run refuses bad settings before it serves, naming the flag, the value
// and what to give instead; with good ones it serves until it cannot.
func TestRun(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(kubeconfigYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = busy.Close() }()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cases := map[string]struct {
		listen, kubeconfig, nsContext, prom string
		offer                               bool
		scrape                              time.Duration
		want                                string
	}{
		"a Prometheus URL without its scheme":    {prom: "prometheus:9090", want: `--prometheus-url "prometheus:9090" is not an http(s) URL: give Prometheus's address, for example http://prometheus.monitoring.svc:9090`},
		"a scrape interval under a second":       {scrape: time.Millisecond, want: "--prometheus-scrape-interval 1ms is too short"},
		"users offered on a public address":      {listen: "0.0.0.0:9090", offer: true, want: "loopback"},
		"no kubeconfig, not in a cluster":        {want: "not in a cluster and no --kubeconfig"},
		"a kubeconfig that is not there":         {kubeconfig: "/nonexistent/kubeconfig", want: "no such file"},
		"a namespaces context that is not there": {kubeconfig: kc, nsContext: "nope", want: `--namespaces-context "nope" is not a context of ` + kc + `: use one of admin, dev-a, or - for none`},
		// Everything set: it gets as far as listening, on an address
		// taken.
		"the address is taken": {listen: busy.Addr().String(), kubeconfig: kc, nsContext: "dev-a", offer: true, want: "address already in use"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if tc.scrape == 0 {
				tc.scrape = 15 * time.Second
			}
			if tc.listen == "" {
				tc.listen = "127.0.0.1:9090"
			}
			t.Setenv("KUBERNETES_SERVICE_HOST", "")
			err := run(tc.listen, tc.kubeconfig, tc.nsContext, tc.offer, log, tc.prom, tc.scrape, "")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("run: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func TestParseFlags(t *testing.T) {
	fs := flag.NewFlagSet("mpijob-dashboard", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	s, err := parseFlags(fs, []string{"--kubeconfig=/k", "--offer-kubeconfig-users", "--prometheus-scrape-interval=30s"})
	want := settings{listen: "127.0.0.1:9090", kubeconfig: "/k", offerUsers: true, scrape: 30 * time.Second}
	if err != nil || s != want {
		t.Errorf("parseFlags = %+v, %v; want %+v", s, err, want)
	}
	fs = flag.NewFlagSet("mpijob-dashboard", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if _, err := parseFlags(fs, []string{"--prometheus-scrape-interval=soon"}); err == nil {
		t.Error("a duration that is not one was taken")
	}
}
