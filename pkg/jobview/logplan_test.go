package jobview

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPlanLogsVectors(t *testing.T) {
	raw, err := os.ReadFile("testdata/log-plans.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Vectors []struct {
			Name    string     `json:"name"`
			Request LogRequest `json:"request"`
			Job     LogJob     `json:"job"`
			Plan    LogPlan    `json:"plan"`
		} `json:"vectors"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Vectors) < 15 {
		t.Fatalf("%d vectors, want the whole set", len(file.Vectors))
	}
	for _, v := range file.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			if diff := cmp.Diff(v.Plan, PlanLogs(v.Request, v.Job)); diff != "" {
				t.Errorf("PlanLogs (-want +got):\n%s", diff)
			}
		})
	}
}
