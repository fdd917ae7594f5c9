package dashboard

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/api"
)

// Each user's job list comes from a watch made with that user's own
// credentials (a controller-runtime cache per user and namespace), kept
// while the user is active: the list page and its live stream read memory
// instead of listing every job again, and the API server sees one watch
// per active user instead of a list per change.
const (
	// cacheIdle is how long an unused cache lives.
	cacheIdle = 2 * time.Minute
	// cacheRecheck is how often a cache's user is asked again (with
	// their own access review) whether they may still list the
	// namespace's jobs.
	cacheRecheck = 30 * time.Second
	// syncTimeout bounds the first list of a new cache.
	syncTimeout = 30 * time.Second
)

type jobCache struct {
	cache   *userCache
	cancel  context.CancelFunc
	mu      sync.Mutex
	used    time.Time
	checked time.Time
}

type cacheKey struct{ token, namespace string }

// userCache is one user's cache of a namespace's TrainJobs and, where the
// user may list them, of their JobStatuses (mpijob-manager's status of
// each job, pkg/api/jobstatus.go).
type userCache struct {
	ctrlcache.Cache
	statuses bool
}

// trainJobMapper maps the kinds the caches hold: TrainJobs and JobStatuses.
var trainJobMapper = func() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper([]schema.GroupVersion{trainer.GroupVersion})
	m.Add(trainer.GroupVersion.WithKind("TrainJob"), meta.RESTScopeNamespace)
	m.Add(trainer.GroupVersion.WithKind("TrainJobList"), meta.RESTScopeNamespace)
	m.Add(api.JobStatusGroupVersion.WithKind(api.JobStatusKind), meta.RESTScopeNamespace)
	m.Add(api.JobStatusGroupVersion.WithKind(api.JobStatusKind+"List"), meta.RESTScopeNamespace)
	return m
}()

// jobsCache returns a synced cache of ns's TrainJobs ("" = all) watched
// with c's credentials, after checking (at most every 30 s) that c may
// still list them.
func (s *Server) jobsCache(ctx context.Context, c *userClients, token, ns string) (client.Reader, error) {
	if s.listDirect {
		// Handlers' tests: the fake API server's clients list directly.
		return c, nil
	}
	s.janitor.Do(func() { go s.sweep() })
	key := cacheKey{token, ns}
	s.mu.Lock()
	if s.caches == nil {
		s.caches = map[cacheKey]*jobCache{}
	}
	jc := s.caches[key]
	s.mu.Unlock()
	if jc != nil {
		jc.mu.Lock()
		jc.used = time.Now()
		stale := time.Since(jc.checked) > cmp.Or(s.recheck, cacheRecheck)
		jc.mu.Unlock()
		if !stale {
			return jc.cache, nil
		}
		ok, err := c.can(ctx, ns, "list", "trainer.kubeflow.org", "trainjobs", "")
		if err != nil {
			return nil, err
		}
		if !ok {
			s.drop(key)
			return nil, apierrors.NewForbidden(schema.GroupResource{Group: "trainer.kubeflow.org", Resource: "trainjobs"}, "",
				fmt.Errorf("user %q may no longer list TrainJobs in namespace %q", c.user, ns))
		}
		jc.mu.Lock()
		jc.checked = time.Now()
		jc.mu.Unlock()
		return jc.cache, nil
	}
	if ok, err := c.can(ctx, ns, "list", "trainer.kubeflow.org", "trainjobs", ""); err != nil {
		return nil, err
	} else if !ok {
		// The API server's own refusal, naming the user and the verb.
		if err := c.List(ctx, &trainer.TrainJobList{}, inNamespace(ns)); err != nil {
			return nil, err
		}
		return nil, apierrors.NewForbidden(schema.GroupResource{Group: "trainer.kubeflow.org", Resource: "trainjobs"}, "",
			fmt.Errorf("user %q may not list TrainJobs in namespace %q", c.user, ns))
	}
	cfg := rest.AnonymousClientConfig(s.Base)
	cfg.BearerToken = token
	cfg.QPS, cfg.Burst = 50, 100
	// The list needs no managedFields (a third of a TrainJob's size); the
	// job page and its YAML read the job itself.
	// It caches TrainJobs alone, so a fixed mapping spares each new
	// user's cache the API server's discovery.
	opts := ctrlcache.Options{Scheme: scheme, Mapper: trainJobMapper, DefaultTransform: ctrlcache.TransformStripManagedFields()}
	if ns != "" {
		opts.DefaultNamespaces = map[string]ctrlcache.Config{ns: {}}
	}
	cc, err := ctrlcache.New(cfg, opts)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithCancel(context.Background())
	if _, err := cc.GetInformer(cctx, &trainer.TrainJob{}); err != nil {
		cancel()
		return nil, err
	}
	// The jobs' statuses, where the user may read them: one list of one
	// item, as the user, says so. A role made before JobStatus may not,
	// and a cluster whose mpijob predates it serves none: the jobs then
	// show what their annotation says, and the list never waits on an
	// informer that cannot sync.
	uc := &userCache{Cache: cc}
	if err := c.List(ctx, &api.JobStatusList{}, inNamespace(ns), client.Limit(1)); err == nil {
		if _, err := cc.GetInformer(cctx, &api.JobStatus{}); err != nil {
			cancel()
			return nil, err
		}
		uc.statuses = true
	}
	go func() { _ = cc.Start(cctx) }()
	sctx, scancel := context.WithTimeout(ctx, syncTimeout)
	defer scancel()
	if !cc.WaitForCacheSync(sctx) {
		cancel()
		// Say why with one direct call as the user.
		list := &trainer.TrainJobList{}
		if err := c.List(ctx, list, inNamespace(ns)); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("the job list of namespace %q did not load within %s", ns, syncTimeout)
	}
	jc = &jobCache{cache: uc, cancel: cancel, used: time.Now(), checked: time.Now()}
	s.mu.Lock()
	if old := s.caches[key]; old != nil {
		// Another request made one meanwhile: keep that one.
		s.mu.Unlock()
		cancel()
		return old.cache, nil
	}
	s.caches[key] = jc
	s.mu.Unlock()
	return uc, nil
}

// followed is a namespace's TrainJobs as a live stream follows them: the
// user's cache it is notified by, and how to stop that.
type followed struct {
	ns    string
	cache client.Reader
	stop  func()
}

// watchJobs calls notify after each change of ns's TrainJobs that the
// user's cache (jobsCache) takes in, until f.stop is called: a live stream
// reads the cache, so it waits for the cache and not for a watch of its
// own (which would also start by sending every job of the namespace). The
// jobs the cache holds already are no change. ok is false where there is
// no cache to follow (the handlers' tests).
func (s *Server) watchJobs(ctx context.Context, c *userClients, ns string, notify func()) (f followed, ok bool, err error) {
	r, err := s.jobsCache(ctx, c, c.token, ns)
	if err != nil {
		return f, false, err
	}
	cc, isCache := r.(ctrlcache.Cache)
	if !isCache {
		return f, false, nil
	}
	inf, err := cc.GetInformer(ctx, &trainer.TrainJob{})
	if err != nil {
		return f, false, err
	}
	handler := toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(_ any, initial bool) {
			if !initial {
				notify()
			}
		},
		UpdateFunc: func(any, any) { notify() },
		DeleteFunc: func(any) { notify() },
	}
	reg, err := inf.AddEventHandler(handler)
	if err != nil {
		return f, false, err
	}
	stop := func() { _ = inf.RemoveEventHandler(reg) }
	// A job's status changes in its JobStatus, not on the TrainJob.
	if uc, ok := r.(*userCache); ok && uc.statuses {
		sinf, err := cc.GetInformer(ctx, &api.JobStatus{})
		if err != nil {
			stop()
			return f, false, err
		}
		sreg, err := sinf.AddEventHandler(handler)
		if err != nil {
			stop()
			return f, false, err
		}
		jobsStop := stop
		stop = func() { jobsStop(); _ = sinf.RemoveEventHandler(sreg) }
	}
	return followed{ns: ns, cache: r, stop: stop}, true, nil
}

func (s *Server) drop(key cacheKey) {
	s.mu.Lock()
	jc := s.caches[key]
	delete(s.caches, key)
	s.mu.Unlock()
	if jc != nil {
		jc.cancel()
	}
}

// sweep stops caches nobody used for cacheIdle.
func (s *Server) sweep() {
	for range time.Tick(cacheIdle / 4) {
		s.mu.Lock()
		var idle []cacheKey
		for k, jc := range s.caches {
			jc.mu.Lock()
			if time.Since(jc.used) > cacheIdle {
				idle = append(idle, k)
			}
			jc.mu.Unlock()
		}
		s.mu.Unlock()
		for _, k := range idle {
			s.drop(k)
		}
		s.rows.forget(time.Now().Add(-cacheIdle))
		s.mu.Lock()
		for token, l := range s.listed {
			if time.Since(l.at) > cacheIdle {
				delete(s.listed, token)
			}
		}
		s.mu.Unlock()
	}
}
