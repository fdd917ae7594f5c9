package diagnose

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"hash"
	"runtime"
	"slices"
	"sync"
	"unsafe"
	"weak"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// shared holds one copy of the values that many cached pods repeat: the
// Workers of a job have the same containers, owner, affinity and
// tolerations (the API server's two defaults, a GPU Worker's own), and
// often the same conditions and container states (to the second). A pod
// the cache keeps then points at the first equal value it met instead of
// its own copy. Values are equal when they serialize the same (what the API
// means by them), found by the SHA-256 of that serialization (keyOf). The
// table holds them weakly: a value no cached pod points at any more is
// collected, and its entry with it.
//
// Readers of the cache get deep copies (controller-runtime's default);
// one that reads the store in place (client.UnsafeDisableDeepCopy,
// cached.Each) must not change what it reads, as before.
type shared[T any] struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]weak.Pointer[T]
}

// slice is v or an equal slice met before (nil and empty stay as they are).
func (s *shared[T]) slice(v []T) []T {
	if len(v) == 0 {
		return v
	}
	if p := s.one(&v[0], v); p != &v[0] {
		return unsafe.Slice(p, len(v))
	}
	return v
}

// pointer is v or an equal value met before.
func (s *shared[T]) pointer(v *T) *T {
	if v == nil {
		return nil
	}
	return s.one(v, unsafe.Slice(v, 1))
}

// one returns the first pointer held for what serializes as v does, or
// holds p (the start of v) for the next ones.
func (s *shared[T]) one(p *T, v []T) *T {
	key, ok := keyOf(v)
	if !ok {
		return p
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if w, ok := s.m[key]; ok {
		if held := w.Value(); held != nil {
			return held
		}
	}
	if s.m == nil {
		s.m = map[[sha256.Size]byte]weak.Pointer[T]{}
	}
	s.m[key] = weak.Make(p)
	runtime.AddCleanup(p, s.forget, key)
	return p
}

// wire is an API type's generated protobuf encoding: no reflection, map
// keys in order, so equal values give the same bytes.
type wire interface {
	Size() int
	MarshalToSizedBuffer([]byte) (int, error)
}

// keyer hashes one value after another into a key; keyers are pooled, so
// that a key costs no allocation (TestShareRepeatsAllocatesNothing).
type keyer struct {
	h    hash.Hash
	buf  []byte
	keys []string
	sum  [sha256.Size]byte
}

var keyers = sync.Pool{New: func() any { return &keyer{h: sha256.New()} }}

// keyOf is the key of the values v: the SHA-256 of each one's protobuf
// encoding, each after its length (so that where one ends is part of the
// key). It runs for every pod the manager's cache receives, on both
// replicas: while it hashed the values' JSON (encoding/json's reflection)
// it took 3.5 % of the leader's CPU and 11 % of the other replica's at
// 200 jobs × 8 Workers (docs/development.md, "Measured 2026-12-03,
// 10:20"); BenchmarkShareRepeats measures both. A node selector (a map,
// no protobuf type of its own) is hashed as its pairs in key order, and
// any other value as its JSON.
func keyOf[T any](v []T) (key [sha256.Size]byte, ok bool) {
	k := keyers.Get().(*keyer)
	defer keyers.Put(k)
	k.h.Reset()
	for i := range v {
		if sel, isMap := any(&v[i]).(*map[string]string); isMap {
			k.addMap(*sel)
			continue
		}
		m, isWire := any(&v[i]).(wire)
		if !isWire {
			b, err := json.Marshal(v[i])
			if err != nil {
				return key, false
			}
			k.buf = binary.AppendUvarint(k.buf[:0], uint64(len(b)))
			k.h.Write(k.buf)
			k.h.Write(b)
			continue
		}
		n := m.Size()
		k.buf = binary.AppendUvarint(k.buf[:0], uint64(n))
		l := len(k.buf)
		k.buf = slices.Grow(k.buf, n)[:l+n]
		if _, err := m.MarshalToSizedBuffer(k.buf[l:]); err != nil {
			return key, false
		}
		k.h.Write(k.buf)
	}
	k.h.Sum(k.sum[:0])
	return k.sum, true
}

// addMap hashes m's pairs in key order, each string after its length.
func (k *keyer) addMap(m map[string]string) {
	k.keys = k.keys[:0]
	for key := range m {
		k.keys = append(k.keys, key)
	}
	slices.Sort(k.keys)
	k.buf = binary.AppendUvarint(k.buf[:0], uint64(len(m)))
	for _, key := range k.keys {
		k.buf = binary.AppendUvarint(k.buf, uint64(len(key)))
		k.buf = append(k.buf, key...)
		k.buf = binary.AppendUvarint(k.buf, uint64(len(m[key])))
		k.buf = append(k.buf, m[key]...)
	}
	k.h.Write(k.buf)
}

// forget drops key's entry once what it held is gone (an equal value may
// have taken the entry over since).
func (s *shared[T]) forget(key [sha256.Size]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w, ok := s.m[key]; ok && w.Value() == nil {
		delete(s.m, key)
	}
}

// size is how many values the table holds (for tests).
func (s *shared[T]) size() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

var (
	sharedContainers      shared[corev1.Container]
	sharedConditions      shared[corev1.PodCondition]
	sharedContainerStates shared[corev1.ContainerStatus]
	sharedOwners          shared[metav1.OwnerReference]
	sharedAffinities      shared[corev1.Affinity]
	sharedNodeSelectors   shared[map[string]string]
	sharedTolerations     shared[corev1.Toleration]
)

// shareRepeats points p's repeated parts at the equal values other cached
// pods hold.
func shareRepeats(p *corev1.Pod) {
	p.OwnerReferences = sharedOwners.slice(p.OwnerReferences)
	p.Spec.InitContainers = sharedContainers.slice(p.Spec.InitContainers)
	p.Spec.Containers = sharedContainers.slice(p.Spec.Containers)
	p.Spec.Affinity = sharedAffinities.pointer(p.Spec.Affinity)
	if p.Spec.NodeSelector != nil {
		p.Spec.NodeSelector = *sharedNodeSelectors.pointer(&p.Spec.NodeSelector)
	}
	p.Spec.Tolerations = sharedTolerations.slice(p.Spec.Tolerations)
	p.Status.Conditions = sharedConditions.slice(p.Status.Conditions)
	p.Status.InitContainerStatuses = sharedContainerStates.slice(p.Status.InitContainerStatuses)
	p.Status.ContainerStatuses = sharedContainerStates.slice(p.Status.ContainerStatuses)
}
