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
	// TTL is how old a snapshot may be (queue positions then lag by as
	// much; the diagnosis refreshes waiting jobs every 15 s).
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
}

// missRefresh is how old a snapshot may be before a job it does not know
// (its Workload is newer) makes a new one: a burst of new jobs then costs
// one read per second, not one per job.
const missRefresh = time.Second

// Lookup is the package's Lookup, from the shared snapshot. A job whose
// Workload the snapshot lacks gets a fresher snapshot (at most one per
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
	mine, ok := snap.byUID[uid]
	if !ok && !snap.noKueue {
		if snap, err = s.get(ctx, min(s.TTL, missRefresh)); err != nil {
			return nil, err
		}
		mine, ok = snap.byUID[uid]
	}
	if snap.noKueue {
		return nil, nil
	}
	st := &State{Queue: namespace + "/" + name, ClusterQueue: snap.cqOf[namespace+"/"+name]}
	if !ok {
		if st.ClusterQueue == "" {
			st.Message = "LocalQueue " + st.Queue + " does not exist"
		}
		return st, nil
	}
	st.Admitted, st.Message, st.EvictedPodsReadyTimeout = mine.Admitted, mine.Message, mine.EvictedPodsReadyTimeout
	if mine.Pending() {
		key := mine.Namespace + "/" + mine.Name
		st.Position, st.Pending = snap.position[key], snap.pending[key]
	}
	return st, nil
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
	s.snap = snap
	return snap, nil
}

func take(ctx context.Context, r client.Reader, now time.Time) (*snapshot, error) {
	snap := &snapshot{at: now, cqOf: map[string]string{}, byUID: map[types.UID]Workload{}, position: map[string]int32{}, pending: map[string]int32{}}
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
	for _, same := range byCQ {
		sort.SliceStable(same, func(i, j int) bool { return before(same[i], same[j]) })
		for i, w := range same {
			key := w.Namespace + "/" + w.Name
			snap.position[key], snap.pending[key] = int32(i+1), int32(len(same))
		}
	}
	return snap, nil
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
