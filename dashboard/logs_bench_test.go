package dashboard

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/mpijob/mpijob/pkg/logs"
)

// BenchmarkMergedLogsMemory: the dashboard's peak heap while 30 users read
// the merged log (target=all, not following) of a 10-pod job at once,
// streamed and merged a line at a time (now) against the way it was done
// before (every pod's whole log read into memory, then merged), in one
// run. Each reader is another user (one user may hold
// MaxLogStreamsPerUser). The API server is a stand-in that streams 10
// pods' logs of logMiB MiB each; the figure is the dashboard's own memory.
//
//	go test ./dashboard -run '^$' -bench MergedLogsMemory -benchtime 1x
func BenchmarkMergedLogsMemory(b *testing.B) {
	const readers, pods, logMiB = 30, 10, 2
	api := fakeLogAPI(b, pods, logMiB<<20)
	s := &Server{Base: &rest.Config{Host: api.URL}}
	h := s.Handler()
	c, err := s.clientsFor(context.Background(), "bench")
	if err != nil {
		b.Fatal(err)
	}
	// Thirty people, each with one stream (one user may hold
	// MaxLogStreamsPerUser).
	var who atomic.Int32
	stream := func() {
		req := httptest.NewRequest("GET", "http://dash/api/jobs/team-a/big/logs?target=all", nil)
		req.Header.Set("Authorization", fmt.Sprintf("Bearer reader-%d", who.Add(1)))
		rec := &countingWriter{header: http.Header{}}
		h.ServeHTTP(rec, req)
		if rec.code != 0 && rec.code != http.StatusOK {
			b.Fatalf("HTTP %d", rec.code)
		}
	}
	whole := func() { // the code this replaced, kept here as the baseline
		var streams []logs.Stream
		for i := range pods {
			name := fmt.Sprintf("big-node-0-%d", i)
			raw, err := c.cs.CoreV1().Pods("team-a").GetLogs(name, &corev1.PodLogOptions{Timestamps: true}).DoRaw(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			streams = append(streams, logs.Stream{Label: name, Lines: strings.Split(strings.TrimRight(string(raw), "\n"), "\n")})
		}
		red := &logs.Redactor{}
		for _, l := range logs.Merge(streams) {
			_, _ = io.WriteString(io.Discard, red.Line(l.Text)+"\n")
		}
	}
	type row struct {
		name string
		peak uint64
		took time.Duration
	}
	var rows []row
	for range b.N {
		rows = rows[:0]
		for _, way := range []struct {
			name string
			run  func()
		}{{"streamed, merged line by line (now)", stream}, {"whole logs read, then merged (before)", whole}} {
			peak, took := peakHeap(func() {
				var wg sync.WaitGroup
				for range readers {
					wg.Add(1)
					go func() { defer wg.Done(); way.run() }()
				}
				wg.Wait()
			})
			rows = append(rows, row{way.name, peak, took})
		}
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "\n%d readers of a %d-pod job's merged log, %d MiB per pod\n", readers, pods, logMiB)
	fmt.Fprintln(tw, "way\tpeak heap growth\ttime\tpeak / now's")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%.1f MiB\t%s\t%.1f\n", r.name, float64(r.peak)/(1<<20), r.took.Round(time.Millisecond), float64(r.peak)/float64(max(rows[0].peak, 1)))
	}
	_ = tw.Flush()
	b.ReportMetric(float64(rows[0].peak)/(1<<20), "peak-MiB")
}

// peakHeap runs f and returns the most heap in use above where it started,
// sampled every 5 ms, and how long f took.
func peakHeap(f func()) (uint64, time.Duration) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	var peak atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				if m.HeapInuse > base && m.HeapInuse-base > peak.Load() {
					peak.Store(m.HeapInuse - base)
				}
			}
		}
	}()
	start := time.Now()
	f()
	took := time.Since(start)
	close(stop)
	<-done
	return peak.Load(), took
}

type countingWriter struct {
	header http.Header
	code   int
	n      int64
}

func (w *countingWriter) Header() http.Header         { return w.header }
func (w *countingWriter) WriteHeader(code int)        { w.code = code }
func (w *countingWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

// fakeLogAPI answers the dashboard's calls for a job "big" in team-a with
// pods Workers, each log size bytes of timestamped lines, generated as
// they are sent.
func fakeLogAPI(b *testing.B, pods, size int) *httptest.Server {
	b.Helper()
	list := corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}}
	for i := range pods {
		list.Items = append(list.Items, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("big-node-0-%d", i), Namespace: "team-a",
			Labels: map[string]string{"jobset.sigs.k8s.io/jobset-name": "big", "jobset.sigs.k8s.io/replicatedjob-name": "node",
				"batch.kubernetes.io/job-completion-index": fmt.Sprint(i)}}})
	}
	podList, err := json.Marshal(list)
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/api":
			_, _ = w.Write([]byte(`{"kind":"APIVersions","versions":["v1"]}`))
		case r.URL.Path == "/apis":
			_, _ = w.Write([]byte(`{"kind":"APIGroupList","apiVersion":"v1","groups":[]}`))
		case r.URL.Path == "/api/v1":
			_, _ = w.Write([]byte(`{"kind":"APIResourceList","groupVersion":"v1","resources":[{"name":"pods","singularName":"pod","namespaced":true,"kind":"Pod","verbs":["get","list"]}]}`))
		case strings.HasSuffix(r.URL.Path, "/selfsubjectreviews"):
			user := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
			_, _ = fmt.Fprintf(w, `{"kind":"SelfSubjectReview","apiVersion":"authentication.k8s.io/v1","status":{"userInfo":{"username":%q}}}`, user)
		case strings.HasSuffix(r.URL.Path, "/log"):
			w.Header().Set("Content-Type", "text/plain")
			bw := bufio.NewWriterSize(w, 32<<10)
			for i, sent := 0, 0; sent < size; i++ {
				n, _ := fmt.Fprintf(bw, "%s step %d of a chatty training program, loss 0.%06d\n", t0.Add(time.Duration(i)*time.Millisecond).Format(time.RFC3339Nano), i, i)
				sent += n
			}
			_ = bw.Flush()
		case strings.HasSuffix(r.URL.Path, "/pods"):
			_, _ = w.Write(podList)
		default:
			http.NotFound(w, r)
		}
	}))
	b.Cleanup(srv.Close)
	return srv
}
