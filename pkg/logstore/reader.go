package logstore

import (
	"bufio"
	"context"
	"io"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Query is what a client asks the read API for: one role's lines (or one
// Worker's), since a time, before a time.
type Query struct {
	// Role is launcher or worker.
	Role string
	// Index is a Worker's index; -1 for every Worker.
	Index int
	// SinceSeconds, when positive, keeps only newer lines.
	SinceSeconds int64
	// End, when set, keeps only older lines (exclusive).
	End time.Time
}

// Reader reads stored logs through the API server, as the user whose
// credentials its clients carry.
type Reader interface {
	// Available reports whether the cluster serves the read API.
	Available(ctx context.Context) bool
	// Open streams a job's stored lines, "TIME TEXT" per line, in order.
	Open(ctx context.Context, ns, job string, q Query) (io.ReadCloser, error)
}

// APIReader is Reader over a clientset.
type APIReader struct {
	REST      rest.Interface
	Discovery discovery.DiscoveryInterface
}

// NewReader reads through cs (nil when cs has no REST client, as fakes).
func NewReader(cs kubernetes.Interface) Reader {
	if cs == nil || cs.CoreV1() == nil || cs.Discovery() == nil {
		return nil
	}
	rc := cs.CoreV1().RESTClient()
	if r, ok := rc.(*rest.RESTClient); ok && r == nil {
		return nil
	}
	return APIReader{REST: rc, Discovery: cs.Discovery()}
}

// availableRetry is the first wait before discovery is asked again.
var availableRetry = 500 * time.Millisecond

// Available asks discovery for logs.mpijob.dev/v1alpha1. A group the
// API server does not serve is an answer at once; any other error (the
// aggregated API briefly unavailable, a timeout on a loaded cluster) is
// asked again, a few times over about ten seconds, before the store is
// taken as absent.
func (a APIReader) Available(ctx context.Context) bool {
	if a.Discovery == nil || a.REST == nil {
		return false
	}
	delay := availableRetry
	for try := 0; ; try++ {
		_, err := a.Discovery.ServerResourcesForGroupVersion(Group + "/" + Version)
		if err == nil {
			return true
		}
		if apierrors.IsNotFound(err) || try == 4 {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(delay):
		}
		delay *= 2
	}
}

// Open streams the lines.
func (a APIReader) Open(ctx context.Context, ns, job string, q Query) (io.ReadCloser, error) {
	req := a.REST.Get().AbsPath(Path(ns, job))
	if q.Role != "" {
		req = req.Param("role", q.Role)
	}
	if q.Index >= 0 && q.Role != "" && q.Role != "launcher" {
		req = req.Param("index", strconv.Itoa(q.Index))
	}
	if q.SinceSeconds > 0 {
		req = req.Param("sinceSeconds", strconv.FormatInt(q.SinceSeconds, 10))
	}
	if !q.End.IsZero() {
		req = req.Param("end", q.End.UTC().Format(time.RFC3339Nano))
	}
	rc, err := req.Stream(ctx)
	if err != nil {
		return nil, err
	}
	return rc, nil
}

// Tail keeps the last n lines of r (all when n < 0).
func Tail(r io.Reader, n int64) ([]string, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	var ring []string
	for sc.Scan() {
		if n == 0 {
			continue
		}
		ring = append(ring, sc.Text())
		if n > 0 && int64(len(ring)) > n {
			ring = ring[1:]
		}
	}
	return ring, sc.Err()
}
