package cli

import (
	"bytes"
	"fmt"
	"io"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/logs"
)

// BenchmarkGetTable1000 is `get -o wide -A` for 1,000 jobs without the
// API call: building the table from the jobs and printing it.
func BenchmarkGetTable1000(b *testing.B) {
	jobs := make([]trainer.TrainJob, 1000)
	for i := range jobs {
		jobs[i] = testJob(fmt.Sprintf("team-%d", i%10), fmt.Sprintf("job-%04d", i), "mpi-openmpi", 8,
			&api.Status{Phase: api.PhaseRunning, WorkersReady: 8, WorkersTotal: 8}, time.Duration(i)*time.Second)
	}
	p := printers.NewTablePrinter(printers.PrintOptions{Wide: true, WithNamespace: true})
	b.ReportAllocs()
	for b.Loop() {
		if err := p.PrintObj(JobTable(jobs, now), io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLogsMerge is `logs --all` for a Launcher and 8 Workers of
// 10,000 lines each: merging by time, redacting and printing. It reports
// lines per second.
func BenchmarkLogsMerge(b *testing.B) {
	const perPod = 10000
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	var streams []logs.Stream
	for p := 0; p < 9; p++ {
		s := logs.Stream{Label: fmt.Sprintf("worker-%d", p)}
		for i := 0; i < perPod; i++ {
			ts := t0.Add(time.Duration(i*9+p) * time.Millisecond).Format(time.RFC3339Nano)
			s.Lines = append(s.Lines, fmt.Sprintf("%s step %d loss=0.%04d lr=0.001 throughput=1234.5 samples/s", ts, i, i))
		}
		streams = append(streams, s)
	}
	b.ReportAllocs()
	var out bytes.Buffer
	for b.Loop() {
		out.Reset()
		f := &lineFilter{prefix: true}
		for _, l := range logs.Merge(streams) {
			f.print(&out, l)
		}
	}
	b.ReportMetric(float64(9*perPod)*float64(b.N)/b.Elapsed().Seconds(), "lines/s")
}
