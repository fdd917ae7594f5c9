//go:build e2e

// Command chaos checks that nothing is lost while mpijob-manager churns. It
// runs MPI jobs of mixed outcomes on the local cluster's kwok nodes (no
// containers run, so a hundred fit on this machine): jobs that succeed,
// jobs whose Worker is OOM-killed, jobs that run past their deadline, jobs
// created suspended and resumed, and jobs deleted while they run. First one
// job of each kind runs on a calm cluster: what it ends with is the
// reference. Then -jobs of them run while mpijob-manager's pods are killed
// at random moments (grace 0): the leading replica, or both replicas at
// once. Once every job settles it counts, by kind:
//
//   - lost (created, never deleted, gone), duplicated (there, never
//     created) and resurrected (deleted, there again) jobs;
//   - statuses whose phase and reason differ from the calm run's;
//   - transitions whose Event is missing or written twice: each change in
//     the status's history has one Event of its reason from mpijob-manager;
//   - NetworkPolicies that differ from the calm run's (one per job while
//     the job exists, none once it is gone).
//
// It exits non-zero when any count is not zero.
//
//	go run -tags e2e ./bench/chaos [-jobs 100] [-seed 1] [-every 20s-60s]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/mpijob/mpijob/bench/internal/local"
	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/jobstatus"
	"github.com/mpijob/mpijob/pkg/localcluster"
	"github.com/mpijob/mpijob/test/framework"
)

var (
	jobs     = flag.Int("jobs", 100, "jobs in the chaos run, of every kind in turn")
	seed     = flag.Uint64("seed", 1, "seed of the kill moments and which replicas die")
	minEvery = flag.Duration("min-every", 20*time.Second, "shortest wait between kills")
	maxEvery = flag.Duration("max-every", 60*time.Second, "longest wait between kills")
	settle   = flag.Duration("settle", 10*time.Minute, "how long the jobs may take to settle after the last create")
)

// kind is one outcome a job is built for.
type kind string

const (
	succeeds  kind = "succeeds"
	rankFails kind = "a Worker is OOM-killed"
	timesOut  kind = "runs past its deadline"
	resumed   kind = "suspended, then resumed"
	deleted   kind = "deleted while it runs"
)

var kinds = []kind{succeeds, rankFails, timesOut, resumed, deleted}

func main() {
	flag.Parse()
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

type bench struct {
	cl    client.Client
	cs    kubernetes.Interface
	admin client.Client
}

// outcome is what a job ended with.
type outcome struct {
	phase    api.Phase
	reason   string
	history  int
	events   map[string]int // transitions' Events by reason
	policies int
}

func (o outcome) String() string {
	return fmt.Sprintf("%s/%s", o.phase, o.reason)
}

func run(ctx context.Context) error {
	opts, err := local.Cluster(ctx)
	if err != nil {
		return err
	}
	cfg, err := local.Config(opts, "", 200, 400)
	if err != nil {
		return err
	}
	cl, err := client.New(cfg, client.Options{Scheme: api.NewScheme()})
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	b := &bench{cl: cl, cs: cs, admin: cl}

	// The calm run: one job of each kind, nothing killed.
	fmt.Fprintln(os.Stderr, "calm run: one job of each kind")
	calmNS, done, err := local.Namespace(ctx, b.cl, "chaos-calm")
	if err != nil {
		return err
	}
	calm, err := b.runJobs(ctx, calmNS, len(kinds), nil)
	done()
	if err != nil {
		return fmt.Errorf("the calm run: %w", err)
	}
	ref := map[kind]outcome{}
	for name, o := range calm.outcomes {
		ref[calm.kinds[name]] = o
	}
	for _, k := range kinds {
		fmt.Fprintf(os.Stderr, "  %-26s %s, %d transitions, Events %v, NetworkPolicies %d\n", k, ref[k], ref[k].history, ref[k].events, ref[k].policies)
	}

	// The chaos run.
	fmt.Fprintf(os.Stderr, "chaos run: %d jobs while mpijob-manager's pods are killed every %s-%s\n", *jobs, *minEvery, *maxEvery)
	ns, done, err := local.Namespace(ctx, b.cl, "chaos")
	if err != nil {
		return err
	}
	defer done()
	rng := rand.New(rand.NewPCG(*seed, *seed^0x5eed))
	killer := &killer{b: b, rng: rng}
	got, err := b.runJobs(ctx, ns, *jobs, killer)
	if err != nil {
		return fmt.Errorf("the chaos run: %w", err)
	}
	return report(ref, got, killer)
}

// result is what a run's jobs ended with.
type result struct {
	kinds       map[string]kind
	outcomes    map[string]outcome
	lost        []string
	duplicated  []string
	resurrected []string
}

// runJobs creates n jobs in ns, each kind in turn, resumes and deletes
// those of those kinds, and waits until every job settles; k (nil: none)
// kills mpijob-manager's pods meanwhile and stops before the jobs are
// read.
func (b *bench) runJobs(ctx context.Context, ns string, n int, k *killer) (*result, error) {
	res := &result{kinds: map[string]kind{}, outcomes: map[string]outcome{}}
	stop := func() {}
	if k != nil {
		kctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); k.loop(kctx) }()
		stop = func() { cancel(); wg.Wait() }
	}
	defer stop()
	var names []string
	for i := range n {
		kd := kinds[i%len(kinds)]
		name := fmt.Sprintf("j%03d", i)
		tj := job(ns, name, kd)
		if err := retry(ctx, func() error { return b.cl.Create(ctx, tj) }); err != nil {
			return nil, fmt.Errorf("create %s: %w", name, err)
		}
		res.kinds[name] = kd
		names = append(names, name)
	}
	fmt.Fprintf(os.Stderr, "  %d jobs created\n", n)
	// The suspended ones resume, the ones to delete go, once running.
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for _, name := range names {
		switch res.kinds[name] {
		case resumed:
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(20 * time.Second)
				patch := client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"suspend":false}}`))
				if err := retry(ctx, func() error {
					return b.cl.Patch(ctx, &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}, patch)
				}); err != nil {
					errs <- fmt.Errorf("resume %s: %w", name, err)
				}
			}()
		case deleted:
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := b.waitPhase(ctx, ns, name, api.PhaseRunning, 5*time.Minute); err != nil {
					errs <- fmt.Errorf("%s never ran: %w", name, err)
					return
				}
				if err := retry(ctx, func() error {
					return client.IgnoreNotFound(b.cl.Delete(ctx, &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}},
						client.PropagationPolicy(metav1.DeletePropagationBackground)))
				}); err != nil {
					errs <- fmt.Errorf("delete %s: %w", name, err)
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return nil, err
	}
	// Every job that stays settles: a finished phase, as mpijob says it.
	start := time.Now()
	err := wait.PollUntilContextTimeout(ctx, 5*time.Second, *settle, true, func(ctx context.Context) (bool, error) {
		l := &trainer.TrainJobList{}
		if err := b.cl.List(ctx, l, client.InNamespace(ns)); err != nil {
			return false, nil //nolint:nilerr // keep polling through a manager restart
		}
		if err := jobstatus.List(ctx, b.cl, l.Items, client.InNamespace(ns)); err != nil {
			return false, nil //nolint:nilerr // keep polling through a manager restart
		}
		for _, tj := range l.Items {
			s, _, _ := api.ReadStatus(tj.Annotations)
			if tj.DeletionTimestamp == nil && res.kinds[tj.Name] != deleted && !s.Phase.Finished() {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "  not every job settled within %s\n", *settle)
	} else {
		fmt.Fprintf(os.Stderr, "  every job settled %s after the last create\n", time.Since(start).Round(time.Second))
	}
	stop()
	if k != nil {
		// The manager back at full strength, and time for a last round
		// of every controller: what it puts right now counts.
		if err := localcluster.WaitRollout(ctx, b.admin, localcluster.ManagerNamespace, localcluster.ManagerDeployment, 3*time.Minute); err != nil {
			return nil, err
		}
		time.Sleep(30 * time.Second)
	} else {
		time.Sleep(10 * time.Second)
	}
	return res, b.read(ctx, ns, res)
}

// read reads what every job ended with, and what is there that should not
// be, or is not that should.
func (b *bench) read(ctx context.Context, ns string, res *result) error {
	l := &trainer.TrainJobList{}
	if err := b.cl.List(ctx, l, client.InNamespace(ns)); err != nil {
		return err
	}
	if err := jobstatus.List(ctx, b.cl, l.Items, client.InNamespace(ns)); err != nil {
		return err
	}
	evs := &eventsv1.EventList{}
	if err := b.cl.List(ctx, evs, client.InNamespace(ns)); err != nil {
		return err
	}
	pols := &networkingv1.NetworkPolicyList{}
	if err := b.cl.List(ctx, pols, client.InNamespace(ns)); err != nil {
		return err
	}
	policies := map[string]int{}
	for _, p := range pols.Items {
		if p.Labels["app.kubernetes.io/managed-by"] == api.FieldManager {
			policies[p.Labels[jobsetv1alpha2.JobSetNameKey]]++
		}
	}
	events := map[string]map[string]int{}
	for _, e := range evs.Items {
		if e.ReportingController != api.FieldManager || e.Regarding.Kind != "TrainJob" || e.Action != "Diagnose" {
			continue
		}
		if events[e.Regarding.Name] == nil {
			events[e.Regarding.Name] = map[string]int{}
		}
		n := 1
		if e.Series != nil && e.Series.Count > 1 {
			n = int(e.Series.Count)
		}
		events[e.Regarding.Name][e.Reason] += n
	}
	there := map[string]bool{}
	for _, tj := range l.Items {
		there[tj.Name] = true
		kd, ok := res.kinds[tj.Name]
		switch {
		case !ok:
			res.duplicated = append(res.duplicated, tj.Name)
			continue
		case kd == deleted:
			res.resurrected = append(res.resurrected, tj.Name)
			continue
		}
		s, _, _ := api.ReadStatus(tj.Annotations)
		res.outcomes[tj.Name] = outcome{phase: s.Phase, reason: s.Reason, history: len(s.History), events: events[tj.Name], policies: policies[tj.Name]}
	}
	for name, kd := range res.kinds {
		switch {
		case kd == deleted:
			if policies[name] > 0 {
				// Its policy outlived it: counted against the kind.
				res.outcomes[name] = outcome{phase: "gone", policies: policies[name]}
			} else {
				res.outcomes[name] = outcome{phase: "gone"}
			}
		case !there[name]:
			res.lost = append(res.lost, name)
		}
	}
	return nil
}

// extra is how many more Events o has than transitions in its history
// (negative: fewer). The calm run's is the reference: each transition has
// one Event.
func extra(o outcome) int {
	total := 0
	for _, n := range o.events {
		total += n
	}
	return total - o.history
}

// eventsOnce compares o's Events with its transitions against the calm
// run's job of its kind: missing, Events fewer; twice, Events more.
func eventsOnce(o, calm outcome) (missing, twice int) {
	d := extra(o) - extra(calm)
	if d < 0 {
		return -d, 0
	}
	return 0, d
}

func report(ref map[kind]outcome, got *result, k *killer) error {
	type row struct {
		jobs, asCalm, eventsMissing, eventsTwice, policiesDiffer int
		differ                                                   []string
	}
	rows := map[kind]*row{}
	for _, kd := range kinds {
		rows[kd] = &row{}
	}
	names := make([]string, 0, len(got.outcomes))
	for name := range got.outcomes {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		o, kd := got.outcomes[name], got.kinds[name]
		r := rows[kd]
		r.jobs++
		want := ref[kd]
		if o.phase == want.phase && o.reason == want.reason {
			r.asCalm++
		} else {
			r.differ = append(r.differ, fmt.Sprintf("%s: %s (calm: %s)", name, o, want))
		}
		if kd != deleted {
			m, t := eventsOnce(o, want)
			r.eventsMissing += m
			r.eventsTwice += t
			if m+t > 0 {
				r.differ = append(r.differ, fmt.Sprintf("%s: %d transitions, Events %v", name, o.history, o.events))
			}
		}
		if o.policies != want.policies {
			r.policiesDiffer++
			r.differ = append(r.differ, fmt.Sprintf("%s: %d NetworkPolicies (calm: %d)", name, o.policies, want.policies))
		}
	}
	fmt.Printf("\nmpijob-manager killed %d times (%d of them both replicas at once), every %s-%s, seed %d\n\n", k.kills, k.both, *minEvery, *maxEvery, *seed)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tJOBS\tENDED AS CALM\tTHE CALM JOB\tEVENTS MISSING\tEVENTS TWICE\tPOLICIES DIFFER")
	bad := 0
	for _, kd := range kinds {
		r := rows[kd]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%d\t%d\t%d\n", kd, r.jobs, r.asCalm, ref[kd], r.eventsMissing, r.eventsTwice, r.policiesDiffer)
		bad += r.jobs - r.asCalm + r.eventsMissing + r.eventsTwice + r.policiesDiffer
	}
	_ = tw.Flush()
	fmt.Printf("\nlost %d, duplicated %d, resurrected %d\n", len(got.lost), len(got.duplicated), len(got.resurrected))
	bad += len(got.lost) + len(got.duplicated) + len(got.resurrected)
	for _, kd := range kinds {
		for _, d := range rows[kd].differ {
			fmt.Println("  " + d)
		}
	}
	for _, l := range [][]string{got.lost, got.duplicated, got.resurrected} {
		if len(l) > 0 {
			fmt.Println("  " + strings.Join(l, ", "))
		}
	}
	if bad > 0 {
		return fmt.Errorf("%d differences from the calm run", bad)
	}
	return nil
}

// job is one job of kind kd: 2 Workers on the kwok nodes.
func job(ns, name string, kd kind) *trainer.TrainJob {
	w := framework.MakeTrainJob(name, ns, "mpi-openmpi").NumNodes(2).OnKwokNodes()
	switch kd {
	case rankFails:
		w = w.FailWorkersOnKwok("OOMKilled")
	case timesOut:
		w = w.HoldOnKwok()
		w.Spec.ActiveDeadlineSeconds = 60
	case resumed:
		w = w.Suspend()
	case deleted:
		w = w.HoldOnKwok()
	}
	return w.Obj()
}

func (b *bench) waitPhase(ctx context.Context, ns, name string, phase api.Phase, within time.Duration) error {
	return wait.PollUntilContextTimeout(ctx, 2*time.Second, within, true, func(ctx context.Context) (bool, error) {
		tj := &trainer.TrainJob{}
		if err := b.cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, tj); err != nil {
			return false, nil //nolint:nilerr // keep polling through a manager restart
		}
		if err := jobstatus.Get(ctx, b.cl, tj); err != nil {
			return false, nil //nolint:nilerr // keep polling through a manager restart
		}
		s, _, _ := api.ReadStatus(tj.Annotations)
		return s.Phase == phase, nil
	})
}

// retry retries a write that met a manager pod on its way down (its
// webhook refuses while no replica serves), for up to two minutes.
func retry(ctx context.Context, f func() error) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(context.Context) (bool, error) {
		last = f()
		if last == nil || apierrors.IsAlreadyExists(last) || apierrors.IsNotFound(last) {
			return true, nil
		}
		return false, nil
	})
	if err != nil && last != nil {
		return last
	}
	if apierrors.IsNotFound(last) {
		return last
	}
	return nil
}

// killer kills mpijob-manager's pods at random moments.
type killer struct {
	b     *bench
	rng   *rand.Rand
	kills int
	both  int
}

func (k *killer) loop(ctx context.Context) {
	for {
		wait := *minEvery + time.Duration(k.rng.Int64N(int64(*maxEvery-*minEvery)+1))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		both := k.rng.IntN(3) == 0
		if err := k.kill(ctx, both); err != nil {
			if !errors.Is(err, context.Canceled) {
				fmt.Fprintln(os.Stderr, "  kill:", err)
			}
			continue
		}
		k.kills++
		if both {
			k.both++
		}
	}
}

// kill kills the leading replica, or every replica, at once (grace 0).
func (k *killer) kill(ctx context.Context, both bool) error {
	pods, err := localcluster.ManagerPods(ctx, k.b.admin)
	if err != nil {
		return err
	}
	var victims []string
	if both {
		for _, p := range pods {
			victims = append(victims, p.Name)
		}
	} else {
		leader, err := localcluster.ManagerLeader(ctx, k.b.cs)
		if err != nil {
			return err
		}
		if leader != "" {
			victims = append(victims, leader)
		}
	}
	if len(victims) == 0 {
		return errors.New("no mpijob-manager pod to kill")
	}
	for _, v := range victims {
		if err := localcluster.DeleteManagerPod(ctx, k.b.admin, v, ptr.To[int64](0)); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "  %s killed %s\n", time.Now().Format("15:04:05"), strings.Join(victims, ", "))
	return nil
}
