package queue

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// memReader serves Kueue's Workloads and LocalQueues from memory, as the
// manager's cache does (with its WorkloadsByJob index), and counts List
// calls: lists reads every Workload or LocalQueue, own a job's own
// Workload (by index or by label).
type memReader struct {
	workloads, localQueues []unstructured.Unstructured
	lists, own             int
}

func (m *memReader) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return fmt.Errorf("not used")
}

func (m *memReader) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	lo := &client.ListOptions{}
	lo.ApplyOptions(opts)
	if lo.LabelSelector != nil || lo.FieldSelector != nil {
		m.own++
	} else {
		m.lists++
	}
	var byJob string
	if lo.FieldSelector != nil {
		v, ok := lo.FieldSelector.RequiresExactMatch(WorkloadsByJob)
		if !ok {
			return fmt.Errorf("index with name field:%s does not exist", lo.FieldSelector)
		}
		byJob = v
	}
	ul := list.(*unstructured.UnstructuredList)
	src := m.workloads
	if ul.GroupVersionKind() == localQueueList {
		src = m.localQueues
	}
	for _, o := range src {
		if lo.Namespace != "" && o.GetNamespace() != lo.Namespace {
			continue
		}
		if lo.LabelSelector != nil && !lo.LabelSelector.Matches(labels.Set(o.GetLabels())) {
			continue
		}
		if byJob != "" && !slices.Contains(IndexByJob(&o), byJob) {
			continue
		}
		ul.Items = append(ul.Items, *o.DeepCopy())
	}
	return nil
}

// queued makes n pending Workloads in team-a/default (ClusterQueue mpijob),
// every third of higher priority, and returns the reader.
func queued(n int) *memReader {
	m := &memReader{localQueues: []unstructured.Unstructured{{Object: map[string]any{
		"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
		"metadata": map[string]any{"name": "default", "namespace": "team-a"},
		"spec":     map[string]any{"clusterQueue": "mpijob"},
	}}}}
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	for i := 0; i < n; i++ {
		prio := int64(0)
		if i%3 == 0 {
			prio = 10
		}
		u := unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
			"metadata": map[string]any{"name": fmt.Sprintf("trainjob-j%d", i), "namespace": "team-a",
				"labels":            map[string]any{jobUIDLabel: fmt.Sprintf("uid-%d", i)},
				"creationTimestamp": t0.Add(time.Duration(i) * time.Second).Format(time.RFC3339)},
			"spec": map[string]any{"queueName": "default", "priority": prio},
			"status": map[string]any{"conditions": []any{map[string]any{"type": "QuotaReserved", "status": "False",
				"message": "insufficient unused quota", "lastTransitionTime": metav1.Now().Format(time.RFC3339)}}},
		}}
		m.workloads = append(m.workloads, u)
	}
	return m
}

// The shared snapshot answers as the per-job lookup does, with two List
// calls for a whole round of queued jobs.
func TestSnapshotsAgreeWithLookup(t *testing.T) {
	ctx := context.Background()
	m := queued(40)
	snaps := &Snapshots{Reader: m, TTL: time.Minute}
	jobLabels := map[string]string{NameLabel: "default"}
	for i := 0; i < 40; i++ {
		uid := types.UID(fmt.Sprintf("uid-%d", i))
		want, err := Lookup(ctx, m, "team-a", jobLabels, uid)
		if err != nil {
			t.Fatal(err)
		}
		got, err := snaps.Lookup(ctx, "team-a", jobLabels, uid)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("job %d (-Lookup,+Snapshots):\n%s", i, diff)
		}
	}
	m.lists, m.own = 0, 0
	snaps = &Snapshots{Reader: m, TTL: time.Minute}
	for i := 0; i < 40; i++ {
		if _, err := snaps.Lookup(ctx, "team-a", jobLabels, types.UID(fmt.Sprintf("uid-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if m.lists != 2 || m.own != 40 {
		t.Errorf("a round of 40 queued jobs made %d List calls of every Workload or LocalQueue and %d of a job's own Workload, want 2 and 40", m.lists, m.own)
	}
	// A job whose Workload is newer than the snapshot is looked up directly.
	if got, err := snaps.Lookup(ctx, "team-a", jobLabels, "uid-new"); err != nil || got == nil || got.Position != 0 {
		t.Errorf("a job without a Workload yet: %+v, %v", got, err)
	}
}

// A job's own Workload is read at every lookup, not from the snapshot:
// Kueue preempts a running job (its TrainJob is suspended) or admits a
// preempted one again within the snapshot's TTL, and the diagnosis must
// say so at once, not "Admitted" before "Preempted" (seen on the local
// cluster) nor "Preempted" while its pods start again.
func TestSnapshotsReadTheJobsOwnWorkload(t *testing.T) {
	ctx := context.Background()
	m := queued(3)
	// setConditions replaces the conditions of the job's Workload.
	setConditions := func(conds ...map[string]any) {
		t.Helper()
		list := make([]any, 0, len(conds))
		for _, c := range conds {
			list = append(list, c)
		}
		if err := unstructured.SetNestedSlice(m.workloads[1].Object, list, "status", "conditions"); err != nil {
			t.Fatal(err)
		}
	}
	at := func(d time.Duration) string {
		return time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC).Add(d).Format(time.RFC3339)
	}
	reserved := map[string]any{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "lastTransitionTime": at(time.Minute)}
	setConditions(reserved)
	clock := time.Date(2026, 11, 22, 10, 2, 0, 0, time.UTC)
	snaps := &Snapshots{Reader: m, TTL: time.Minute, Now: func() time.Time { return clock }}
	jobLabels := map[string]string{NameLabel: "default"}
	type view struct {
		Admitted, Preempted bool
		Position, Pending   int32
	}
	look := func() view {
		t.Helper()
		st, err := snaps.Lookup(ctx, "team-a", jobLabels, "uid-1")
		if err != nil || st == nil {
			t.Fatalf("lookup: %+v, %v", st, err)
		}
		return view{st.Admitted, st.Preempted, st.Position, st.Pending}
	}
	if diff := cmp.Diff(view{Admitted: true}, look()); diff != "" {
		t.Errorf("admitted (-want,+got):\n%s", diff)
	}

	// Kueue preempts it, a second later: the snapshot still holds it admitted.
	clock = clock.Add(time.Second)
	evicted := map[string]any{"type": "Evicted", "status": "True", "reason": "Preempted", "lastTransitionTime": at(2*time.Minute + time.Second),
		"message": "Preempted to accommodate a workload (UID: wl-9, JobUID: uid-9) due to prioritization in the ClusterQueue"}
	setConditions(reserved, evicted)
	if diff := cmp.Diff(view{Admitted: true, Preempted: true}, look()); diff != "" {
		t.Errorf("preempted within the snapshot's TTL (-want,+got):\n%s", diff)
	}
	// Its pods stopped, Kueue takes its quota back: it queues again, and
	// gets its position from a fresher snapshot once a second has passed.
	clock = clock.Add(time.Second)
	setConditions(map[string]any{"type": "QuotaReserved", "status": "False", "reason": "Pending", "lastTransitionTime": at(2*time.Minute + 2*time.Second)}, evicted)
	want, err := Lookup(ctx, m, "team-a", jobLabels, "uid-1")
	if err != nil {
		t.Fatal(err)
	}
	lists := m.lists
	if diff := cmp.Diff(view{Preempted: true, Position: want.Position, Pending: want.Pending}, look()); diff != "" || want.Position == 0 {
		t.Errorf("queued again after its preemption (-want,+got):\n%s", diff)
	}
	if m.lists != lists+2 {
		t.Errorf("a job queued again made %d reads of every Workload or LocalQueue, want 2 (one fresher snapshot)", m.lists-lists)
	}
	// Admitted again within the TTL: not preempted any more.
	clock = clock.Add(time.Second)
	setConditions(map[string]any{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "lastTransitionTime": at(2*time.Minute + 3*time.Second)},
		map[string]any{"type": "Evicted", "status": "False", "reason": "QuotaReserved", "lastTransitionTime": at(2*time.Minute + 3*time.Second)})
	if diff := cmp.Diff(view{Admitted: true}, look()); diff != "" {
		t.Errorf("admitted again within the snapshot's TTL (-want,+got):\n%s", diff)
	}
}

// BenchmarkQueuedRound measures one diagnosis round over every queued job
// (what the manager does every 15 s): per job, the lookup, with 500 jobs.
// Run: go test ./pkg/queue -bench QueuedRound -benchmem
func BenchmarkQueuedRound(b *testing.B) {
	ctx := context.Background()
	jobLabels := map[string]string{NameLabel: "default"}
	for _, n := range []int{100, 500} {
		m := queued(n)
		b.Run(fmt.Sprintf("per-job-list/%d", n), func(b *testing.B) {
			m.lists = 0
			for i := 0; i < b.N; i++ {
				for j := 0; j < n; j++ {
					if _, err := Lookup(ctx, m, "team-a", jobLabels, types.UID(fmt.Sprintf("uid-%d", j))); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(m.lists)/float64(b.N), "lists/round")
		})
		b.Run(fmt.Sprintf("shared-snapshot/%d", n), func(b *testing.B) {
			m.lists = 0
			for i := 0; i < b.N; i++ {
				snaps := &Snapshots{Reader: m, TTL: time.Minute}
				for j := 0; j < n; j++ {
					if _, err := snaps.Lookup(ctx, "team-a", jobLabels, types.UID(fmt.Sprintf("uid-%d", j))); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(m.lists)/float64(b.N), "lists/round")
		})
	}
}

// Jobs newer than the snapshot make at most one fresh read per second
// between them, not a read of every Workload each; once the read holds
// their Workloads they get their positions.
func TestSnapshotsMissesAreBounded(t *testing.T) {
	ctx := context.Background()
	m := queued(10)
	clock := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	snaps := &Snapshots{Reader: m, TTL: time.Minute, Now: func() time.Time { return clock }}
	jobLabels := map[string]string{NameLabel: "default"}
	if _, err := snaps.Lookup(ctx, "team-a", jobLabels, "uid-0"); err != nil {
		t.Fatal(err)
	}
	// 20 new jobs arrive; Kueue has made Workloads for them.
	m.workloads = queued(30).workloads
	m.lists = 0
	for i := 10; i < 30; i++ {
		st, err := snaps.Lookup(ctx, "team-a", jobLabels, types.UID(fmt.Sprintf("uid-%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		if st.Position != 0 || st.ClusterQueue != "mpijob" {
			t.Errorf("job %d before a fresh read: %+v, want its queue without a position", i, st)
		}
	}
	if m.lists != 0 {
		t.Errorf("20 new jobs within a second made %d List calls, want 0", m.lists)
	}
	clock = clock.Add(missRefresh)
	st, err := snaps.Lookup(ctx, "team-a", jobLabels, "uid-29")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := Lookup(ctx, m, "team-a", jobLabels, "uid-29")
	if st.Position == 0 || st.Position != want.Position || m.lists != 2+2 {
		t.Errorf("after a second: position %d (per-job lookup %d), %d List calls of every Workload or LocalQueue (want 2 for the fresh read, 2 for the check)", st.Position, want.Position, m.lists)
	}
}

// fakeVisibility answers as Kueue's visibility API: the pending Workloads
// of a ClusterQueue in an order it chooses, and counts the requests.
type fakeVisibility struct {
	order    map[string][]string // ClusterQueue → "namespace/name", in Kueue's order
	err      error
	requests int
}

func (f *fakeVisibility) PendingInClusterQueue(_ context.Context, cq string) ([]Pending, error) {
	f.requests++
	if f.err != nil {
		return nil, f.err
	}
	var out []Pending
	for i, key := range f.order[cq] {
		ns, name, _ := strings.Cut(key, "/")
		out = append(out, Pending{Namespace: ns, Name: name, LocalQueueName: "default", PositionInClusterQueue: int32(i)})
	}
	return out, nil
}

// Kueue's own order (its visibility API) wins over the computed one; a
// Workload it does not list has no position; when the API fails, the
// computed order stands and the failure is reported once.
func TestSnapshotsUseKueuesVisibilityAPI(t *testing.T) {
	ctx := context.Background()
	jobLabels := map[string]string{NameLabel: "default"}
	m := queued(5)
	// Kueue's order: newest first (e.g. another queueing strategy), and
	// trainjob-j0 not listed yet.
	vis := &fakeVisibility{order: map[string][]string{"mpijob": {"team-a/trainjob-j4", "team-a/trainjob-j3", "team-a/trainjob-j2", "team-a/trainjob-j1"}}}
	snaps := &Snapshots{Reader: m, TTL: time.Minute, Visibility: vis}
	got := map[string]int32{}
	for i := 0; i < 5; i++ {
		st, err := snaps.Lookup(ctx, "team-a", jobLabels, types.UID(fmt.Sprintf("uid-%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		got[fmt.Sprintf("j%d", i)] = st.Position
		if st.Pending != 5 {
			t.Errorf("job %d: %d pending, want 5", i, st.Pending)
		}
		if st.PositionFromKueue != (i != 0) {
			t.Errorf("job %d: PositionFromKueue %v", i, st.PositionFromKueue)
		}
	}
	if diff := cmp.Diff(map[string]int32{"j0": 0, "j1": 4, "j2": 3, "j3": 2, "j4": 1}, got); diff != "" {
		t.Errorf("positions (-want,+got):\n%s", diff)
	}
	if vis.requests != 1 {
		t.Errorf("a round of 5 jobs in one ClusterQueue made %d visibility requests, want 1", vis.requests)
	}

	// The API is not served (no aggregation layer, Kueue without it):
	// computed positions, one report.
	var reports []error
	vis = &fakeVisibility{err: fmt.Errorf("the server could not find the requested resource")}
	clock := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	snaps = &Snapshots{Reader: m, TTL: time.Minute, Visibility: vis, Now: func() time.Time { return clock },
		OnVisibilityError: func(err error) { reports = append(reports, err) }}
	for round := 0; round < 3; round++ {
		clock = clock.Add(time.Minute)
		for i := 0; i < 5; i++ {
			uid := types.UID(fmt.Sprintf("uid-%d", i))
			st, err := snaps.Lookup(ctx, "team-a", jobLabels, uid)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := Lookup(ctx, m, "team-a", jobLabels, uid)
			if st.Position != want.Position || st.PositionFromKueue {
				t.Errorf("round %d job %d: position %d (from Kueue %v), want computed %d", round, i, st.Position, st.PositionFromKueue, want.Position)
			}
		}
	}
	if len(reports) != 1 {
		t.Errorf("the failing API was reported %d times over 3 snapshots, want once", len(reports))
	}
}

// A job not yet created stands behind every pending Workload of its
// ClusterQueue of its priority or higher.
func TestProspect(t *testing.T) {
	m := queued(7) // j0, j3, j6 of priority 10; the other four of 0
	s := &Snapshots{Reader: m, TTL: time.Minute}
	cases := map[string]struct {
		queue    string
		priority int32
		want     *Prospect
	}{
		"priority 0 waits behind all seven":                    {queue: "default", want: &Prospect{Queue: "team-a/default", ClusterQueue: "mpijob", Ahead: 7, Pending: 7}},
		"priority 10 waits behind the three of 10":             {queue: "default", priority: 10, want: &Prospect{Queue: "team-a/default", ClusterQueue: "mpijob", Ahead: 3, Pending: 7}},
		"priority 11 goes first":                               {queue: "default", priority: 11, want: &Prospect{Queue: "team-a/default", ClusterQueue: "mpijob", Pending: 7}},
		"a LocalQueue that does not exist has no ClusterQueue": {queue: "typo", want: &Prospect{Queue: "team-a/typo"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := s.Prospect(context.Background(), "team-a", tc.queue, tc.priority)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Prospect (-want +got):\n%s", diff)
			}
		})
	}
}
