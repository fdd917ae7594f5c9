package queue

import (
	"context"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Snapshots answers Lookup for many jobs from one read of Kueue's
// Workloads and LocalQueues, taken at most once per TTL and shared: with N
// jobs queued, a diagnosis round costs two List calls and O(N log N) work,
// not N List calls of every Workload and O(N²).
type Snapshots struct {
	Reader client.Reader
	// Visibility, when set, gives the positions in Kueue's own order
	// (one request per ClusterQueue with pending Workloads per snapshot).
	// Without it, or when it fails (the API is not served, or not to
	// mpijob), positions are computed from the Workloads: priority, then
	// creation or eviction time, as Kueue's BestEffortFIFO and StrictFIFO
	// order them.
	Visibility PendingLister
	// OnVisibilityError hears when the visibility API stops answering
	// (once, not per snapshot), to log it.
	OnVisibilityError func(error)
	// TTL is how old a snapshot may be (queue positions then lag by as
	// much; the diagnosis looks at a waiting job every 15 s to a minute:
	// diagnose.WaitingRefresh, WaitingRefreshMax).
	TTL time.Duration
	// Now is the clock (tests).
	Now func() time.Time

	mu   sync.Mutex
	snap *snapshot
}

type snapshot struct {
	at time.Time
	// noKueue: Kueue's API is not installed.
	noKueue bool
	cqOf    map[string]string
	byUID   map[types.UID]Workload
	// position and pending per Workload "namespace/name".
	position map[string]int32
	pending  map[string]int32
	// pendingIn lists the pending Workloads ("namespace/name") per
	// ClusterQueue, and pendingWL the Workloads themselves.
	pendingIn map[string][]string
	pendingWL map[string][]Workload
	// fromKueue: the ClusterQueues whose positions came from Kueue's
	// visibility API.
	fromKueue map[string]bool
	// visibilityErr is why the visibility API did not answer, if it did not.
	visibilityErr error
}

// missRefresh is how old a snapshot may be before a job it does not know
// (its Workload is newer) makes a new one: a burst of new jobs then costs
// one read per second, not one per job.
const missRefresh = time.Second

// Lookup is the package's Lookup, from the shared snapshot. The job's own
// Workload (admitted, preempted, inactive, Kueue's message) is read at
// every lookup, through the WorkloadsByJob index where the Reader is a
// cache that has it: a snapshot up to TTL old said "Admitted" for a job
// Kueue had just preempted (its TrainJob suspended, the eviction written
// after the snapshot), and "Preempted" for one it had just admitted again.
// Only the positions and the LocalQueues' ClusterQueues come from the
// snapshot. A job whose Workload the snapshot lacks, or holds as admitted
// while it is pending again, gets a fresher snapshot (at most one per
// missRefresh); one whose Workload Kueue has not made yet gets its queue
// without a position.
func (s *Snapshots) Lookup(ctx context.Context, namespace string, labels map[string]string, uid types.UID) (*State, error) {
	name := labels[NameLabel]
	if name == "" {
		return nil, nil
	}
	snap, err := s.get(ctx, s.TTL)
	if err != nil {
		return nil, err
	}
	if snap.noKueue {
		return nil, nil
	}
	mine, ok, err := ownWorkload(ctx, s.Reader, namespace, uid)
	if err != nil {
		return nil, err
	}
	key := mine.Namespace + "/" + mine.Name
	if _, known := snap.byUID[uid]; !known || (ok && mine.Pending() && snap.position[key] == 0) {
		if snap, err = s.get(ctx, min(s.TTL, missRefresh)); err != nil {
			return nil, err
		}
		if snap.noKueue {
			return nil, nil
		}
	}
	st := &State{Queue: namespace + "/" + name, ClusterQueue: snap.cqOf[namespace+"/"+name]}
	if !ok {
		if st.ClusterQueue == "" {
			st.Message = "LocalQueue " + st.Queue + " does not exist"
		}
		return st, nil
	}
	st.of(mine)
	if mine.Pending() {
		st.Position, st.Pending = snap.position[key], snap.pending[key]
		st.PositionFromKueue = snap.fromKueue[st.ClusterQueue] && st.Position > 0
	}
	return st, nil
}

// ownWorkload reads the Workload of the job with uid in namespace ns:
// through the WorkloadsByJob index where r is a cache that has it, else by
// Kueue's label.
func ownWorkload(ctx context.Context, r client.Reader, ns string, uid types.UID) (Workload, bool, error) {
	wls, err := listWorkloads(ctx, r, client.InNamespace(ns), client.MatchingFields{WorkloadsByJob: string(uid)})
	if err != nil {
		if wls, err = listWorkloads(ctx, r, client.InNamespace(ns), client.MatchingLabels{jobUIDLabel: string(uid)}); err != nil {
			return Workload{}, false, err
		}
	}
	for _, w := range wls {
		if w.OwnerUID == uid {
			return w, true, nil
		}
	}
	return Workload{}, false, nil
}

// get returns the snapshot, taken anew when it is maxAge old or older.
func (s *Snapshots) get(ctx context.Context, maxAge time.Duration) (*snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if s.Now != nil {
		now = s.Now()
	}
	if s.snap != nil && now.Sub(s.snap.at) < maxAge {
		return s.snap, nil
	}
	snap, err := take(ctx, s.Reader, now)
	if err != nil {
		return nil, err
	}
	if s.Visibility != nil && !snap.noKueue {
		snap.fromVisibility(ctx, s.Visibility)
		if snap.visibilityErr != nil && (s.snap == nil || s.snap.visibilityErr == nil) && s.OnVisibilityError != nil {
			s.OnVisibilityError(snap.visibilityErr)
		}
	}
	s.snap = snap
	return snap, nil
}

func take(ctx context.Context, r client.Reader, now time.Time) (*snapshot, error) {
	snap := &snapshot{at: now, cqOf: map[string]string{}, byUID: map[types.UID]Workload{}, position: map[string]int32{}, pending: map[string]int32{}, pendingIn: map[string][]string{}, pendingWL: map[string][]Workload{}, fromKueue: map[string]bool{}}
	all, err := listWorkloads(ctx, r)
	if meta.IsNoMatchError(err) {
		snap.noKueue = true
		return snap, nil
	}
	if err != nil {
		return nil, err
	}
	if snap.cqOf, err = clusterQueues(ctx, r); err != nil {
		return nil, err
	}
	byCQ := map[string][]Workload{}
	for _, w := range all {
		if w.OwnerUID != "" {
			snap.byUID[w.OwnerUID] = w
		}
		if w.Pending() {
			cq := snap.cqOf[w.Namespace+"/"+w.Queue]
			byCQ[cq] = append(byCQ[cq], w)
		}
	}
	for cq, same := range byCQ {
		sort.SliceStable(same, func(i, j int) bool { return before(same[i], same[j]) })
		for i, w := range same {
			key := w.Namespace + "/" + w.Name
			snap.position[key], snap.pending[key] = int32(i+1), int32(len(same))
			snap.pendingIn[cq] = append(snap.pendingIn[cq], key)
		}
		snap.pendingWL[cq] = same
	}
	return snap, nil
}

// fromVisibility replaces the computed positions with Kueue's own, one
// ClusterQueue at a time; a ClusterQueue whose read fails keeps the
// computed ones. The pending count stays the cached Workloads' count.
func (snap *snapshot) fromVisibility(ctx context.Context, v PendingLister) {
	for _, cq := range sortedKeys(snap.pendingIn) {
		if cq == "" {
			continue
		}
		items, err := v.PendingInClusterQueue(ctx, cq)
		if err != nil {
			snap.visibilityErr = err
			continue
		}
		// A Workload Kueue does not list (not queued by Kueue yet) has no
		// position rather than a computed one that could repeat Kueue's.
		for _, key := range snap.pendingIn[cq] {
			delete(snap.position, key)
		}
		for _, it := range items {
			snap.position[it.Namespace+"/"+it.Name] = it.PositionInClusterQueue + 1
		}
		snap.fromKueue[cq] = true
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// before is Kueue's order in a ClusterQueue: higher priority first, then
// older (or earlier evicted) first.
func before(a, b Workload) bool {
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	if !a.orderTime().Equal(b.orderTime()) {
		return a.orderTime().Before(b.orderTime())
	}
	return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
}

// Prospect is where a job not yet created would stand in its queue.
type Prospect struct {
	// Queue is "namespace/localqueue"; ClusterQueue is empty when the
	// LocalQueue does not exist.
	Queue, ClusterQueue string
	// Ahead is how many pending Workloads of the ClusterQueue Kueue would
	// take before it: those of its priority or higher (a new job is the
	// newest of its priority); Pending is how many wait in all.
	Ahead, Pending int32
}

// Prospect says where a new job for LocalQueue localQueue of namespace,
// with the given priority, would stand; nil when Kueue is not installed.
func (s *Snapshots) Prospect(ctx context.Context, namespace, localQueue string, priority int32) (*Prospect, error) {
	snap, err := s.get(ctx, s.TTL)
	if err != nil || snap.noKueue {
		return nil, err
	}
	p := &Prospect{Queue: namespace + "/" + localQueue, ClusterQueue: snap.cqOf[namespace+"/"+localQueue]}
	if p.ClusterQueue == "" {
		return p, nil
	}
	for _, w := range snap.pendingWL[p.ClusterQueue] {
		p.Pending++
		if w.Priority >= priority {
			p.Ahead++
		}
	}
	return p, nil
}
