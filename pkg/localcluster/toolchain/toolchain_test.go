package toolchain

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// The version constants label what the toolchain modules build; they must
// name the same versions as the go.mod files that really pin them.
func TestPinsMatchToolchain(t *testing.T) {
	cases := map[string]struct {
		dir, module, version string
	}{
		"kubernetes": {"kubernetes", "k8s.io/kubernetes", KubernetesVersion},
		"etcd":       {"etcd", "go.etcd.io/etcd/server/v3", EtcdVersion},
		"kwok":       {"kwok", "sigs.k8s.io/kwok", KwokVersion},
		"coredns":    {"coredns", "github.com/coredns/coredns", CoreDNSVersion},
		"trainer":    {"controllers", "github.com/kubeflow/trainer/v2", TrainerVersion},
		"jobset":     {"controllers", "sigs.k8s.io/jobset", JobSetVersion},
		"kueue":      {"kueue", "sigs.k8s.io/kueue", KueueVersion},
		"prometheus": {"prometheus", "github.com/prometheus/prometheus", PrometheusModuleVersion},
		"s3":         {"s3", "github.com/versity/versitygw", VersityGWVersion},
		"loki":       {"loki", "github.com/grafana/loki/v3", "v" + LokiVersion},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("..", "..", "..", "hack", "toolchain", tc.dir, "go.mod"))
			if err != nil {
				t.Fatal(err)
			}
			re := regexp.MustCompile(`(?m)^\s*(?:require\s+)?` + regexp.QuoteMeta(tc.module) + `\s+(v\S+)`)
			m := re.FindSubmatch(b)
			if m == nil {
				t.Fatalf("%s/go.mod does not require %s", tc.dir, tc.module)
			}
			if got := string(m[1]); got != tc.version {
				t.Errorf("%s/go.mod pins %s %s, the constant says %s", tc.dir, tc.module, got, tc.version)
			}
		})
	}
}

// The model registry is built by a script from the pins file it reads.
func TestModelRegistryPin(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "hack", "toolchain", "model-registry", "pins"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^MR_VERSION=(\S+)$`).FindSubmatch(b)
	if m == nil || string(m[1]) != ModelRegistryVersion {
		t.Errorf("model-registry/pins pins %q, the constant says %s", m, ModelRegistryVersion)
	}
}

func TestToolModuleStamp(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "hack", "toolchain", "x")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(s string) {
		if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m := Module{Dir: "x", Packages: []string{"."}, Outputs: []string{"x"}}
	write("module x\nrequire a v1.0.0\n")
	s1, err := m.Stamp(root)
	if err != nil {
		t.Fatal(err)
	}
	s1again, _ := m.Stamp(root)
	write("module x\nrequire a v1.0.1\n")
	s2, _ := m.Stamp(root)
	if s1 != s1again {
		t.Errorf("stamp is not stable: %s then %s", s1, s1again)
	}
	if s1 == s2 {
		t.Errorf("changing a pin kept the stamp %s: the toolchain would not rebuild", s1)
	}

	bin := t.TempDir()
	ok, _, err := m.UpToDate(root, bin)
	if err != nil || ok {
		t.Fatalf("empty bin: upToDate = %v, %v; want false", ok, err)
	}
	_ = os.WriteFile(filepath.Join(bin, "x"), nil, 0o755)
	_ = os.WriteFile(filepath.Join(bin, ".stamp-x"), []byte(s2+"\n"), 0o644)
	if ok, _, _ := m.UpToDate(root, bin); !ok {
		t.Errorf("binary and matching stamp present: upToDate = false, want true")
	}
	write("module x\nrequire a v1.0.2\n")
	if ok, _, _ := m.UpToDate(root, bin); ok {
		t.Errorf("pin changed: upToDate = true, want false")
	}
}
