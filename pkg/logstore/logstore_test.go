package logstore

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestParseCRI(t *testing.T) {
	cases := map[string]struct {
		in      string
		want    CRILine
		wantErr bool
	}{
		"full line": {
			in:   "2026-11-24T06:00:00.123456789Z stdout F [1,3]<stdout>:loss 0.5",
			want: CRILine{Time: time.Date(2026, 11, 24, 6, 0, 0, 123456789, time.UTC), Stream: "stdout", Message: "[1,3]<stdout>:loss 0.5"},
		},
		"partial": {
			in:   "2026-11-24T06:00:00Z stderr P part one",
			want: CRILine{Time: time.Date(2026, 11, 24, 6, 0, 0, 0, time.UTC), Stream: "stderr", Partial: true, Message: "part one"},
		},
		"empty message": {
			in:   "2026-11-24T06:00:00Z stdout F",
			want: CRILine{Time: time.Date(2026, 11, 24, 6, 0, 0, 0, time.UTC), Stream: "stdout"},
		},
		"spaces kept": {
			in:   "2026-11-24T06:00:00Z stdout F   indented  ",
			want: CRILine{Time: time.Date(2026, 11, 24, 6, 0, 0, 0, time.UTC), Stream: "stdout", Message: "  indented  "},
		},
		"no time":    {in: "stdout F hello", wantErr: true},
		"bad stream": {in: "2026-11-24T06:00:00Z stdin F x", wantErr: true},
		"bad tag":    {in: "2026-11-24T06:00:00Z stdout X x", wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseCRI(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" && !tc.wantErr {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

func TestTargets(t *testing.T) {
	cases := map[string]struct {
		pod    *corev1.Pod
		name   string
		want   Target
		wantOK bool
	}{
		"launcher from labels": {
			pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{
				"jobset.sigs.k8s.io/jobset-name": "pi", "jobset.sigs.k8s.io/replicatedjob-name": "launcher", "batch.kubernetes.io/job-completion-index": "0",
			}}, Spec: corev1.PodSpec{NodeName: "n1"}},
			want: Target{Job: "pi", Role: "launcher", Index: 0, Node: "n1"}, wantOK: true,
		},
		"worker 3 from labels": {
			pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{
				"jobset.sigs.k8s.io/jobset-name": "pi", "jobset.sigs.k8s.io/replicatedjob-name": "node", "batch.kubernetes.io/job-completion-index": "3",
			}}},
			want: Target{Job: "pi", Role: "node", Index: 3}, wantOK: true,
		},
		"another JobSet's role": {
			pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{
				"jobset.sigs.k8s.io/jobset-name": "x", "jobset.sigs.k8s.io/replicatedjob-name": "driver",
			}}},
		},
		"no JobSet": {pod: &corev1.Pod{}},
		"worker from the name": {
			name: "my-job-node-0-12-abcde",
			want: Target{Pod: "my-job-node-0-12-abcde", Job: "my-job", Role: "node", Index: 12}, wantOK: true,
		},
		"launcher from the name": {
			name: "a-launcher-0-0-x9z8y",
			want: Target{Pod: "a-launcher-0-0-x9z8y", Job: "a", Role: "launcher", Index: 0}, wantOK: true,
		},
		"other pod's name": {name: "coredns-7d8f9-abcde", want: Target{Pod: "coredns-7d8f9-abcde"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got Target
			var ok bool
			if tc.pod != nil {
				got, ok = FromPod(Target{}, tc.pod)
			} else {
				got, ok = FromName(Target{Pod: tc.name})
			}
			if ok != tc.wantOK {
				t.Fatalf("ok = %v, want %v", ok, tc.wantOK)
			}
			if !ok {
				return
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

func TestParsePodDir(t *testing.T) {
	ns, pod, uid, ok := ParsePodDir("team-a_pi-node-0-1-abcde_2fa9b250-11e8-493f-95cd-bb69882b042b")
	if !ok || ns != "team-a" || pod != "pi-node-0-1-abcde" || uid != "2fa9b250-11e8-493f-95cd-bb69882b042b" {
		t.Errorf("got %q %q %q %v", ns, pod, uid, ok)
	}
	if _, _, _, ok := ParsePodDir("not-a-pod-dir"); ok {
		t.Error("parsed a name without namespace and UID")
	}
}

func TestSelectorLogQL(t *testing.T) {
	cases := map[string]struct {
		sel  Selector
		want string
	}{
		"whole job": {Selector{Namespace: "team-a", Job: "pi", Index: -1},
			`{kubernetes_namespace_name="team-a", kubernetes_labels_jobset_sigs_k8s_io_jobset_name="pi", kubernetes_container_name="node"}`},
		"launcher": {Selector{Namespace: "team-a", Job: "pi", Role: "launcher", Index: -1},
			`{kubernetes_namespace_name="team-a", kubernetes_labels_jobset_sigs_k8s_io_jobset_name="pi", kubernetes_labels_jobset_sigs_k8s_io_replicatedjob_name="launcher", kubernetes_container_name="node"}`},
		"worker 2": {Selector{Namespace: "team-a", Job: "pi", Role: "node", Index: 2},
			`{kubernetes_namespace_name="team-a", kubernetes_labels_jobset_sigs_k8s_io_jobset_name="pi", kubernetes_labels_jobset_sigs_k8s_io_replicatedjob_name="node", kubernetes_labels_batch_kubernetes_io_job_completion_index="2", kubernetes_container_name="node"}`},
		"every container": {Selector{Namespace: "n", Job: "j", Index: -1, Init: true},
			`{kubernetes_namespace_name="n", kubernetes_labels_jobset_sigs_k8s_io_jobset_name="j"}`},
		"quotes kept": {Selector{Namespace: "n", Job: `j"x`, Index: -1, Init: true},
			`{kubernetes_namespace_name="n", kubernetes_labels_jobset_sigs_k8s_io_jobset_name="j\"x"}`},
		// The job that exists now: its JobSet's lines, and those stored
		// without a JobSet UID (the reader bounds their time).
		"bound to a JobSet": {Selector{Namespace: "n", Job: "j", Index: -1, JobSetUID: "2fa9b250-11e8"},
			`{kubernetes_namespace_name="n", kubernetes_labels_jobset_sigs_k8s_io_jobset_name="j", kubernetes_container_name="node", kubernetes_labels_jobset_sigs_k8s_io_jobset_uid=~"2fa9b250-11e8|"}`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.sel.LogQL(); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestParseQuery(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	cases := map[string]struct {
		q       map[string][]string
		want    Selector
		start   time.Time
		wantErr string
	}{
		"defaults":      {q: nil, want: Selector{Namespace: "ns", Job: "j", Index: -1}, start: now.Add(-30 * 24 * time.Hour)},
		"worker 3":      {q: map[string][]string{"role": {"worker"}, "index": {"3"}}, want: Selector{Namespace: "ns", Job: "j", Role: "node", Index: 3}, start: now.Add(-30 * 24 * time.Hour)},
		"since":         {q: map[string][]string{"sinceSeconds": {"600"}}, want: Selector{Namespace: "ns", Job: "j", Index: -1}, start: now.Add(-10 * time.Minute)},
		"role typo":     {q: map[string][]string{"role": {"lancher"}}, wantErr: `role "lancher": use launcher or worker`},
		"index alone":   {q: map[string][]string{"index": {"1"}}, wantErr: `index "1": give it with role=worker`},
		"bad index":     {q: map[string][]string{"role": {"worker"}, "index": {"-1"}}, wantErr: `index "-1": use a Worker index`},
		"bad since":     {q: map[string][]string{"sinceSeconds": {"ten"}}, wantErr: `sinceSeconds "ten": use a positive number`},
		"bad end":       {q: map[string][]string{"end": {"yesterday"}}, wantErr: `end "yesterday": use an RFC 3339 time`},
		"end before it": {q: map[string][]string{"start": {"2026-11-24T11:00:00Z"}, "end": {"2026-11-24T10:00:00Z"}}, wantErr: "is not before end"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			sel, start, _, err := ParseQuery("ns", "j", tc.q, now)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, sel); diff != "" {
				t.Errorf("selector (-want,+got):\n%s", diff)
			}
			if !start.Equal(tc.start) {
				t.Errorf("start = %s, want %s", start, tc.start)
			}
		})
	}
}

// fakeLoki keeps pushed lines per tenant and answers query_range over
// them (label equality matchers only), as Loki does for these selectors.
type fakeLoki struct {
	mu      sync.Mutex
	entries map[string][]Entry // tenant → lines
	pushes  int
	fail    bool
	// failTenant fails that tenant's pushes (503); refuseTenant refuses
	// them (400).
	failTenant, refuseTenant string
}

func (f *fakeLoki) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	tenant := r.Header.Get("X-Scope-OrgID")
	switch r.URL.Path {
	case "/loki/api/v1/push":
		if f.fail || tenant == f.failTenant {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		if tenant == f.refuseTenant {
			http.Error(w, "entry too far behind", http.StatusBadRequest)
			return
		}
		var body struct {
			Streams []struct {
				Stream map[string]string   `json:"stream"`
				Values [][]json.RawMessage `json:"values"`
			} `json:"streams"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		f.pushes++
		if f.entries == nil {
			f.entries = map[string][]Entry{}
		}
		for _, s := range body.Streams {
			for _, v := range s.Values {
				var ts, line string
				_ = json.Unmarshal(v[0], &ts)
				_ = json.Unmarshal(v[1], &line)
				ns, _ := strconv.ParseInt(ts, 10, 64)
				f.entries[tenant] = append(f.entries[tenant], Entry{Time: time.Unix(0, ns).UTC(), Line: line, Labels: s.Stream})
			}
		}
		w.WriteHeader(http.StatusNoContent)
	case "/loki/api/v1/query_range":
		q := r.URL.Query()
		matchers := parseMatchers(q.Get("query"))
		start, _ := strconv.ParseInt(q.Get("start"), 10, 64)
		end, _ := strconv.ParseInt(q.Get("end"), 10, 64)
		limit, _ := strconv.Atoi(q.Get("limit"))
		var hits []Entry
		for _, e := range f.entries[tenant] {
			if e.Time.UnixNano() < start || e.Time.UnixNano() >= end || !matches(matchers, e.Labels) {
				continue
			}
			hits = append(hits, e)
		}
		sort.SliceStable(hits, func(i, j int) bool { return hits[i].Time.Before(hits[j].Time) })
		if len(hits) > limit {
			hits = hits[:limit]
		}
		type result struct {
			Stream map[string]string `json:"stream"`
			Values [][]string        `json:"values"`
		}
		byStream := map[string]*result{}
		var order []string
		for _, e := range hits {
			k := fmt.Sprint(e.Labels)
			if byStream[k] == nil {
				byStream[k] = &result{Stream: e.Labels}
				order = append(order, k)
			}
			byStream[k].Values = append(byStream[k].Values, []string{strconv.FormatInt(e.Time.UnixNano(), 10), e.Line})
		}
		var res []result
		for _, k := range order {
			res = append(res, *byStream[k])
		}
		if err := json.NewEncoder(w).Encode(map[string]any{"status": "success", "data": map[string]any{"resultType": "streams", "result": res}}); err != nil {
			return
		}
	default:
		http.NotFound(w, r)
	}
}

func parseMatchers(q string) map[string]string {
	out := map[string]string{}
	q = strings.Trim(q, "{}")
	for _, part := range strings.Split(q, ", ") {
		k, v, _ := strings.Cut(part, "=")
		uq, _ := strconv.Unquote(v)
		out[k] = uq
	}
	return out
}

func matches(m, labels map[string]string) bool {
	for k, v := range m {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func criLine(t time.Time, stream, flag, msg string) string {
	return fmt.Sprintf("%s %s %s %s\n", t.Format(time.RFC3339Nano), stream, flag, msg)
}

// The collector reads a pod's log across the kubelet's rotation (rename,
// new file) without losing or repeating a line, joins partial lines,
// tags ranks, skips pods of no MPI job, and retries after the store
// failed.
func TestCollectorFollowsRotation(t *testing.T) {
	loki := &fakeLoki{}
	srv := httptest.NewServer(loki)
	defer srv.Close()
	root := t.TempDir()
	podDir := filepath.Join(root, "team-a_pi-launcher-0-0-abcde_2fa9b250-11e8-493f-95cd-bb69882b042b", "node")
	other := filepath.Join(root, "kube-system_coredns-1-abcde_3fa9b250-11e8-493f-95cd-bb69882b042b", "coredns")
	for _, d := range []string{podDir, other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Date(2026, 11, 24, 6, 0, 0, 0, time.UTC)
	live := filepath.Join(podDir, "0.log")
	write := func(path string, lines ...string) {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range lines {
			_, _ = f.WriteString(l)
		}
		_ = f.Close()
	}
	write(filepath.Join(other, "0.log"), criLine(t0, "stdout", "F", "dns"))
	write(live, criLine(t0, "stdout", "F", "[1,0]<stdout>:rank 0 of 2"), criLine(t0, "stdout", "P", "long "))
	c := &Collector{
		Dirs:      map[string]string{root: "node-1"},
		Store:     &Client{URL: srv.URL},
		Positions: filepath.Join(t.TempDir(), "positions.json"),
	}
	ctx := context.Background()
	if err := c.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	// The partial line's end, a line, then rotation: the old file gets one
	// more line after the rename, and the new one starts.
	write(live, criLine(t0.Add(2*time.Millisecond), "stdout", "F", "line"), criLine(t0.Add(3*time.Millisecond), "stderr", "F", "[1,1]<stderr>:oops"))
	if err := os.Rename(live, live+".20261124-060001"); err != nil {
		t.Fatal(err)
	}
	write(live+".20261124-060001", criLine(t0.Add(4*time.Millisecond), "stdout", "F", "last of the old file"))
	write(live, criLine(t0.Add(5*time.Millisecond), "stdout", "F", "first of the new file"))
	loki.fail = true
	if err := c.Pass(ctx); err == nil {
		t.Fatal("a pass while the store fails: no error")
	}
	loki.fail = false
	if err := c.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	// A restarted collector (positions from its file) sends nothing twice.
	c2 := &Collector{Dirs: c.Dirs, Store: c.Store, Positions: c.Positions}
	c2.load()
	if err := c2.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range loki.entries["team-a"] {
		got = append(got, fmt.Sprintf("%s|%s", MessageOf(e.Line), e.Labels[LabelRole]))
	}
	want := []string{
		"[1,0]<stdout>:rank 0 of 2|launcher",
		"long line|launcher",
		"[1,1]<stderr>:oops|launcher",
		"last of the old file|launcher",
		"first of the new file|launcher",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stored lines (-want,+got):\n%s", diff)
	}
	// Lines stamped alike (a burst) get a nanosecond each, in order.
	for i, e := range loki.entries["team-a"][1:] {
		if !e.Time.After(loki.entries["team-a"][i].Time) {
			t.Errorf("line %d's time %s is not after line %d's %s", i+1, e.Time, i, loki.entries["team-a"][i].Time)
		}
	}
	if got := loki.entries["team-a"][1].Time; !got.Equal(t0.Add(time.Nanosecond)) {
		t.Errorf("the second line stamped %s got %s, want one nanosecond after", t0, got)
	}
	if n := len(loki.entries["kube-system"]); n != 0 {
		t.Errorf("%d lines of a pod of no MPI job were stored", n)
	}
	e := loki.entries["team-a"][0]
	// OpenShift Logging 6's labels (Vector's names of the labelKeys a
	// ClusterLogForwarder lists) and its ViaQ record as the line.
	wantLabels := map[string]string{
		"kubernetes_namespace_name": "team-a", "kubernetes_pod_name": "pi-launcher-0-0-abcde", "kubernetes_container_name": "node",
		"kubernetes_host": "node-1", "log_type": "application", "openshift_log_type": "application",
		"k8s_namespace_name": "team-a", "k8s_pod_name": "pi-launcher-0-0-abcde", "k8s_container_name": "node", "k8s_node_name": "node-1",
		"kubernetes_labels_jobset_sigs_k8s_io_jobset_name":           "pi",
		"kubernetes_labels_jobset_sigs_k8s_io_replicatedjob_name":    "launcher",
		"kubernetes_labels_batch_kubernetes_io_job_completion_index": "0",
	}
	if diff := cmp.Diff(wantLabels, e.Labels); diff != "" {
		t.Errorf("labels (-want,+got):\n%s", diff)
	}
	wantRecord := `{"@timestamp":"2026-11-24T06:00:00Z","message":"[1,0]<stdout>:rank 0 of 2","log_source":"container","log_type":"application"}`
	if e.Line != wantRecord {
		t.Errorf("stored line %s, want the record %s", e.Line, wantRecord)
	}
}

// Range pages through more lines than one answer holds, equal times
// included, each line once and in order.
func TestRangePages(t *testing.T) {
	loki := &fakeLoki{entries: map[string][]Entry{}}
	t0 := time.Date(2026, 11, 24, 6, 0, 0, 0, time.UTC)
	labels := map[string]string{"namespace": "n", "trainjob": "j"}
	n := PageSize*2 + 17
	for i := 0; i < n; i++ {
		// Three lines share each time.
		loki.entries["n"] = append(loki.entries["n"], Entry{Time: t0.Add(time.Duration(i/3) * time.Microsecond), Line: fmt.Sprintf("line %d", i), Labels: labels})
	}
	srv := httptest.NewServer(loki)
	defer srv.Close()
	c := &Client{URL: srv.URL}
	var got []string
	err := c.Range(context.Background(), "n", `{namespace="n", trainjob="j"}`, t0, t0.Add(time.Hour), func(e Entry) error {
		got = append(got, e.Line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("got %d lines, want %d", len(got), n)
	}
	for i, l := range got {
		if l != fmt.Sprintf("line %d", i) {
			t.Fatalf("line %d is %q", i, l)
		}
	}
}

// The read API answers only through the API server's front proxy, only
// to a user allowed to read the pods' logs, and in the kubelet's format.
func TestAPIRefusesWithoutFrontProxy(t *testing.T) {
	a := &API{Store: &Client{URL: "http://127.0.0.1:1"}}
	a.Header.Store(&RequestHeader{UsernameHeaders: []string{"X-Remote-User"}})
	srv := httptest.NewServer(a)
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+Path("team-a", "pi"), nil)
	req.Header.Set("X-Remote-User", "dev-b")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(b), "only the Kubernetes API server may call this API") {
		t.Errorf("a direct call claiming a user: %d %s", resp.StatusCode, b)
	}
	for path, want := range map[string]int{
		"/apis/logs.mpijob.dev/v1alpha1":                          http.StatusOK,
		"/apis/logs.mpijob.dev/v1alpha1/namespaces/a/trainjobs/b": http.StatusNotFound,
	} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", path, resp.StatusCode, want)
		}
	}
}

func TestTail(t *testing.T) {
	for n, want := range map[int64][]string{-1: {"a", "b", "c"}, 0: nil, 2: {"b", "c"}, 5: {"a", "b", "c"}} {
		got, err := Tail(strings.NewReader("a\nb\nc\n"), n)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Tail %d (-want,+got):\n%s", n, diff)
		}
	}
}

// A tenant whose pushes fail holds back only its own lines; lines the
// store refuses for good are dropped, not sent for ever.
func TestCollectorTenantsApart(t *testing.T) {
	loki := &fakeLoki{failTenant: "team-b", refuseTenant: "team-c"}
	srv := httptest.NewServer(loki)
	defer srv.Close()
	root := t.TempDir()
	t0 := time.Date(2026, 11, 24, 6, 0, 0, 0, time.UTC)
	for _, ns := range []string{"team-a", "team-b", "team-c"} {
		d := filepath.Join(root, ns+"_pi-launcher-0-0-abcde_2fa9b250-11e8-493f-95cd-bb69882b042b", "node")
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "0.log"), []byte(criLine(t0, "stdout", "F", "hello from "+ns)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := &Collector{Dirs: map[string]string{root: "n1"}, Store: &Client{URL: srv.URL}}
	if err := c.Pass(context.Background()); err == nil {
		t.Error("team-b's failed push: no error")
	}
	loki.failTenant, loki.refuseTenant = "", ""
	if err := c.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for ns, es := range loki.entries {
		got[ns] = len(es)
	}
	// team-a once, team-b once (on the second pass), team-c dropped.
	if diff := cmp.Diff(map[string]int{"team-a": 1, "team-b": 1}, got); diff != "" {
		t.Errorf("lines stored per tenant (-want,+got):\n%s", diff)
	}
}

// A program that writes without a newline (the runtime splits its output
// into partial records) is stored in pieces of at most MaxLine, not held
// in memory and in the positions file without end; the pieces, in order,
// are all it wrote.
func TestCollectorCapsLinesWithoutEnd(t *testing.T) {
	loki, srvURL, root, podDir := launcherLogDir(t)
	t0 := time.Date(2026, 11, 24, 6, 0, 0, 0, time.UTC)
	var b strings.Builder
	var wrote strings.Builder
	for i := range 100 {
		chunk := strings.Repeat(string(rune('a'+i%26)), 1000)
		wrote.WriteString(chunk)
		b.WriteString(criLine(t0.Add(time.Duration(i)*time.Millisecond), "stdout", "P", chunk))
	}
	if err := os.WriteFile(filepath.Join(podDir, "0.log"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	positions := filepath.Join(t.TempDir(), "positions.json")
	c := &Collector{Dirs: map[string]string{root: "node-1"}, Store: &Client{URL: srvURL}, Positions: positions, MaxLine: 4096}
	if err := c.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	var stored strings.Builder
	for _, e := range loki.entries["team-a"] {
		msg := MessageOf(e.Line)
		if len(msg) > 4096+1000 {
			t.Errorf("a stored piece of %d bytes, more than MaxLine and one record", len(msg))
		}
		stored.WriteString(msg)
	}
	if len(loki.entries["team-a"]) < 20 {
		t.Errorf("%d pieces stored from 100 kB without a newline, want about 25", len(loki.entries["team-a"]))
	}
	st, err := os.Stat(positions)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() > 8<<10 {
		t.Errorf("positions file of %d bytes: the partial line is held there without end", st.Size())
	}
	// A pass that reads nothing new leaves the positions file alone (it
	// was written every second).
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(positions, old, old); err != nil {
		t.Fatal(err)
	}
	if err := c.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(positions); err != nil || !st.ModTime().Equal(old) {
		t.Errorf("a quiet pass wrote the positions again (%v, %v)", st.ModTime(), err)
	}
	// What is still waiting for its end is in the positions; with it, the
	// pieces are everything written.
	if !strings.HasPrefix(wrote.String(), stored.String()) || len(wrote.String())-len(stored.String()) > 4096 {
		t.Errorf("stored %d of %d bytes, or out of order", stored.Len(), wrote.Len())
	}
}

// A tenant that writes fast reads at most MaxTenantRead a pass, shared
// among its files, so another tenant's line goes out in the same pass
// and the chatty tenant's lines follow in later ones, none lost.
func TestCollectorSharesEachPassAmongTenants(t *testing.T) {
	loki := &fakeLoki{}
	srv := httptest.NewServer(loki)
	defer srv.Close()
	root := t.TempDir()
	t0 := time.Date(2026, 11, 24, 6, 0, 0, 0, time.UTC)
	write := func(dir string, lines int) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for i := range lines {
			b.WriteString(criLine(t0.Add(time.Duration(i)*time.Microsecond), "stdout", "F", fmt.Sprintf("%06d %s", i, strings.Repeat("x", 1000))))
		}
		if err := os.WriteFile(filepath.Join(dir, "0.log"), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(root, "team-a_pi-launcher-0-0-abcde_2fa9b250-11e8-493f-95cd-bb69882b042b", "node"), 4000) // about 4 MB
	write(filepath.Join(root, "team-b_quiet-launcher-0-0-fghij_3fa9b250-11e8-493f-95cd-bb69882b042b", "node"), 1)
	c := &Collector{Dirs: map[string]string{root: "node-1"}, Store: &Client{URL: srv.URL}, Positions: filepath.Join(t.TempDir(), "p.json"), MaxTenantRead: 1 << 20}
	if err := c.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(loki.entries["team-b"]); n != 1 {
		t.Errorf("the quiet tenant's line: %d sent in the first pass, want 1", n)
	}
	first := len(loki.entries["team-a"])
	if first == 0 || first > 1100 {
		t.Errorf("the chatty tenant sent %d lines of about 1 kB in one pass with 1 MiB to read, want at most about 1000", first)
	}
	for range 10 {
		if err := c.Pass(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(loki.entries["team-a"]); n != 4000 {
		t.Errorf("the chatty tenant's lines after 11 passes: %d, want all 4000", n)
	}
}

// A pod's lines are its job's only when its Job is one the job's JobSet
// controls: copied labels, a made-up Job or another JobSet's Job are not
// enough, and the JobSet's UID comes from the Job, not from the pod.
func TestOwned(t *testing.T) {
	t0 := Target{Namespace: "team-a", Pod: "pi-launcher-0-0-zzzzz", Job: "pi", Role: "launcher", JobSetUID: "forged-uid"}
	owner := JobOwner{JobSet: "pi", JobSetUID: "js-uid"}
	cases := map[string]struct {
		jobUID     string
		owner      JobOwner
		ownerKnown bool
		want       bool
	}{
		"made by the job's JobSet":          {jobUID: "job-uid", owner: owner, ownerKnown: true, want: true},
		"no Job controls the pod":           {owner: owner, ownerKnown: true},
		"a Job not seen (made up, or gone)": {jobUID: "job-uid"},
		"another JobSet's Job":              {jobUID: "job-uid", owner: JobOwner{JobSet: "other", JobSetUID: "x"}, ownerKnown: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := Owned(t0, tc.jobUID, tc.owner, tc.ownerKnown)
			if ok != tc.want {
				t.Fatalf("Owned = %v, want %v", ok, tc.want)
			}
			if ok && got.JobSetUID != "js-uid" {
				t.Errorf("JobSetUID %q, want the Job's owner's (js-uid), not the pod's label", got.JobSetUID)
			}
		})
	}
	pod := &metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "pi-launcher-0", UID: "job-uid", Controller: ptr.To(true)}}}
	if name, uid := PodJob(pod); name != "pi-launcher-0" || uid != "job-uid" {
		t.Errorf("PodJob = %s %s", name, uid)
	}
	notController := &metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "x", UID: "u"}}}
	if _, uid := PodJob(notController); uid != "" {
		t.Errorf("an owner that is not the controller counted: %s", uid)
	}
	job := &metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{{APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet", Name: "pi", UID: "js-uid", Controller: ptr.To(true)}}}
	if got, ok := JobOwnerOf(job); !ok || got != owner {
		t.Errorf("JobOwnerOf = %+v %v, want %+v", got, ok, owner)
	}
}

// A line whose pieces the kubelet's rotation split (its start, a CRI
// partial line, ends the old file; its end starts the new one) is stored
// whole, whether the collector read the start before the rotation or
// finds both files at once; and a rotated file not read to its end in a
// pass holds its successor back, so the stream keeps its order. Seen in
// make test-e2e: mpirun's tagged output "line 096430 xxx" lost its start.
func TestCollectorJoinsALineAcrossRotation(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 5, 42, 0, 0, time.UTC)
	for name, readBefore := range map[string]bool{"the start read before the rotation": true, "both files found at once": false} {
		t.Run(name, func(t *testing.T) {
			loki, srvURL, root, podDir := launcherLogDir(t)
			live := filepath.Join(podDir, "0.log")
			write := func(path string, lines ...string) { appendLines(t, path, lines...) }
			c := &Collector{Dirs: map[string]string{root: "node-1"}, Store: &Client{URL: srvURL}, Positions: filepath.Join(t.TempDir(), "p.json")}
			ctx := context.Background()
			write(live, criLine(t0, "stdout", "F", "line 096429 x"), criLine(t0.Add(time.Millisecond), "stdout", "P", "line 096430 x"))
			if readBefore {
				if err := c.Pass(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Rename(live, live+".20261130-054200"); err != nil {
				t.Fatal(err)
			}
			write(live, criLine(t0.Add(2*time.Millisecond), "stdout", "F", "xx"), criLine(t0.Add(3*time.Millisecond), "stdout", "F", "line 096431 x"))
			passes(t, c, 2)
			if diff := cmp.Diff([]string{"line 096429 x", "line 096430 xxx", "line 096431 x"}, messages(loki, "team-a")); diff != "" {
				t.Errorf("stored lines (-want,+got):\n%s", diff)
			}
		})
	}
}

// A rotated file read only in part (the tenant's share of a pass) holds
// its successor back until its end: the stream's lines keep their order.
func TestCollectorReadsARotatedFileToItsEndFirst(t *testing.T) {
	loki, srvURL, root, podDir := launcherLogDir(t)
	t0 := time.Date(2026, 11, 30, 5, 42, 0, 0, time.UTC)
	var old strings.Builder
	for i := range 6000 {
		old.WriteString(criLine(t0.Add(time.Duration(i)*time.Microsecond), "stdout", "F", fmt.Sprintf("old %04d %s", i, strings.Repeat("x", 60))))
	}
	if err := os.WriteFile(filepath.Join(podDir, "0.log.20261130-054200"), []byte(old.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(podDir, "0.log"), []byte(criLine(t0.Add(time.Second), "stdout", "F", "new 0000")), 0o644); err != nil {
		t.Fatal(err)
	}
	// 256 KiB a pass: the old file (about 690 KB) takes three.
	c := &Collector{Dirs: map[string]string{root: "node-1"}, Store: &Client{URL: srvURL}, Positions: filepath.Join(t.TempDir(), "p.json"), MaxTenantRead: 256 << 10}
	for range 4 {
		if err := c.Pass(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for _, e := range loki.entries["team-a"] {
		got = append(got, strings.Fields(MessageOf(e.Line))[0])
	}
	if len(got) != 6001 || got[len(got)-1] != "new" || slices.Contains(got[:6000], "new") {
		i := slices.Index(got, "new")
		t.Errorf("%d lines stored, the new file's line at %d: want the old file's 6000 lines first, then the new one", len(got), i)
	}
}

// launcherLogDir serves a fake store and makes the log directory of a
// Launcher's container of team-a under a kubelet's pod log root.
func launcherLogDir(t *testing.T) (loki *fakeLoki, url, root, podDir string) {
	t.Helper()
	loki = &fakeLoki{}
	srv := httptest.NewServer(loki)
	t.Cleanup(srv.Close)
	root = t.TempDir()
	podDir = filepath.Join(root, "team-a_pi-launcher-0-0-abcde_2fa9b250-11e8-493f-95cd-bb69882b042b", "node")
	if err := os.MkdirAll(podDir, 0o755); err != nil {
		t.Fatal(err)
	}
	return loki, srv.URL, root, podDir
}

// appendLines appends lines to the file at path, as the runtime writes.
func appendLines(t *testing.T, path string, lines ...string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	for _, l := range lines {
		if _, err := f.WriteString(l); err != nil {
			t.Fatal(err)
		}
	}
}

// The kubelet removes a deleted pod's log folder about a second after the
// pod's last line (make test-e2e: a suspended job's Launcher wrote mpirun's
// last lines at 23:59:55.6, its container was removed at 23:59:56.9, and
// the store never had them). The collector keeps each file it tails open,
// as a node's log agent does, and reads it to its end once it is gone,
// also while the store refuses a pass; a file gone before its first pass
// is forgotten without a complaint, a line the pod left without end is
// stored as it is, and the open files are closed once read.
func TestCollectorReadsARemovedPodsLastLines(t *testing.T) {
	loki, srvURL, root, podDir := launcherLogDir(t)
	var logged strings.Builder
	c := &Collector{Dirs: map[string]string{root: "node-1"}, Store: &Client{URL: srvURL}, Positions: filepath.Join(t.TempDir(), "p.json"), Log: &logged}
	ctx := context.Background()
	t0 := time.Date(2026, 11, 30, 23, 59, 54, 0, time.UTC)
	live := filepath.Join(podDir, "0.log")
	appendLines(t, live, criLine(t0, "stdout", "F", "[1,1]<stderr>:rank 1: stopped by SIGTERM"))
	if err := c.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	appendLines(t, live, criLine(t0.Add(time.Second), "stdout", "F", "[1,0]<stderr>:rank 0: stopped by SIGTERM"),
		criLine(t0.Add(1100*time.Millisecond), "stderr", "F", "mpirun: the job was aborted"),
		criLine(t0.Add(1200*time.Millisecond), "stdout", "P", "a last line without end"))
	// Another pod that lives and goes between two passes.
	brief := filepath.Join(root, "team-a_pi-node-0-0-fghij_3fa9b250-11e8-493f-95cd-bb69882b042b", "node")
	if err := os.MkdirAll(brief, 0o755); err != nil {
		t.Fatal(err)
	}
	appendLines(t, filepath.Join(brief, "0.log"), criLine(t0, "stdout", "F", "never read"))
	for _, d := range []string{filepath.Dir(podDir), filepath.Dir(brief)} {
		if err := os.RemoveAll(d); err != nil {
			t.Fatal(err)
		}
	}
	loki.mu.Lock()
	loki.fail = true
	loki.mu.Unlock()
	if err := c.Pass(ctx); err == nil {
		t.Fatal("a pass while the store fails: no error")
	}
	loki.mu.Lock()
	loki.fail = false
	loki.mu.Unlock()
	passes(t, c, 2)
	got := messages(loki, "team-a")
	want := []string{"[1,1]<stderr>:rank 1: stopped by SIGTERM", "[1,0]<stderr>:rank 0: stopped by SIGTERM", "mpirun: the job was aborted", "a last line without end"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stored lines (-want,+got):\n%s", diff)
	}
	if len(c.files) != 0 {
		t.Errorf("%d files still tailed after both pods' folders are gone: %v", len(c.files), c.files)
	}
	if logged.Len() != 0 {
		t.Errorf("the collector complained of a removed file:\n%s", logged.String())
	}
}

// passes runs n passes of c, each of which must succeed.
func passes(t *testing.T, c *Collector, n int) {
	t.Helper()
	for range n {
		if err := c.Pass(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// messages is what the fake store holds of tenant, line by line.
func messages(loki *fakeLoki, tenant string) []string {
	loki.mu.Lock()
	defer loki.mu.Unlock()
	var got []string
	for _, e := range loki.entries[tenant] {
		got = append(got, MessageOf(e.Line))
	}
	return got
}
