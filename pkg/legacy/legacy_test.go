package legacy

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// TestGolden converts every legacy manifest of testdata and compares the
// report and manifests (or the error) with testdata/*.golden.
func TestGolden(t *testing.T) {
	inputs, err := filepath.Glob("testdata/*.yaml")
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".yaml")
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			var got string
			res, err := Convert(data)
			if err != nil {
				got = "error: " + err.Error() + "\n"
			} else {
				y, err := res.YAML()
				if err != nil {
					t.Fatal(err)
				}
				got = "# report\n" + res.Report() + "# manifests\n" + string(y)
			}
			if strings.HasPrefix(name, "malformed-") != strings.HasPrefix(got, "error: ") {
				t.Errorf("malformed inputs (and only they) must fail; got:\n%s", got)
			}
			golden := strings.TrimSuffix(in, ".yaml") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./pkg/legacy -update)", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("%s (-want,+got):\n%s", golden, diff)
			}
		})
	}
}

// FuzzConvert: no input makes the converter panic, and what converts
// renders.
func FuzzConvert(f *testing.F) {
	inputs, _ := filepath.Glob("testdata/*.yaml")
	for _, in := range inputs {
		b, err := os.ReadFile(in)
		if err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"apiVersion":"kubeflow.org/v2beta1","kind":"MPIJob","metadata":{"name":"x"},"spec":{"mpiReplicaSpecs":{"Launcher":{"template":{"spec":{"containers":[{}]}}}}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		res, err := Convert(data)
		if err != nil {
			return
		}
		if res.TrainJob == nil || res.TrainJob.Spec.Trainer == nil || res.TrainJob.Spec.Trainer.NumNodes == nil {
			t.Fatalf("converted without a TrainJob shape: %+v", res)
		}
		if _, err := res.YAML(); err != nil {
			t.Fatalf("converted job does not render: %v", err)
		}
	})
}
