package stacks

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/jobpods"
	"github.com/mpijob/mpijob/pkg/podexec"
)

// maxOutput bounds what one pod's collector may return.
const maxOutput = 4 << 20

// PodsOf are the running pods of a job's Launcher and Workers (as
// jobpods.List lists them), where the collector runs: the running
// Launcher, and each running Worker with its index.
func PodsOf(p jobpods.Pods) []Pod {
	var out []Pod
	if l := p.Running(jobpods.RoleLauncher, -1); l != nil {
		out = append(out, Pod{Name: l.Name, Worker: -1, Node: l.Spec.NodeName})
	}
	for _, w := range p.Workers {
		idx, ok := jobpods.Index(&w)
		if !ok || w.Status.Phase != corev1.PodRunning {
			continue
		}
		out = append(out, Pod{Name: w.Name, Worker: idx, Node: w.Spec.NodeName})
	}
	return out
}

// Result is what the collectors of a job's pods found.
type Result struct {
	Ranks  []Rank  `json:"ranks"`
	Groups []Group `json:"groups"`
	// Contrast is the groups in a sentence (see Contrast).
	Contrast string `json:"contrast,omitempty"`
	// Failed are the pods the collector could not run in, with why.
	Failed []string `json:"failed,omitempty"`
}

// Collect runs the collector in each pod's node container, side by side,
// with cfg's identity (the user's, or the manager's for the diagnosis),
// and groups what they found. An error is returned only when no pod
// answered; a Forbidden one says which right is missing.
func Collect(ctx context.Context, cfg *rest.Config, cs kubernetes.Interface, namespace string, pods []Pod) (Result, error) {
	type answer struct {
		pod Pod
		out string
		err error
	}
	answers := make([]answer, len(pods))
	var wg sync.WaitGroup
	for i, p := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := run(ctx, cfg, cs, namespace, p.Name)
			answers[i] = answer{pod: p, out: out, err: err}
		}()
	}
	wg.Wait()
	var res Result
	var firstErr error
	for _, a := range answers {
		if a.err != nil {
			if firstErr == nil {
				firstErr = a.err
			}
			res.Failed = append(res.Failed, fmt.Sprintf("%s (pod %s): %v", a.pod.Where(), a.pod.Name, a.err))
			continue
		}
		res.Ranks = append(res.Ranks, RanksOf(a.pod, Parse(a.out))...)
	}
	if firstErr != nil && len(res.Failed) == len(pods) {
		if apierrors.IsForbidden(firstErr) {
			return res, fmt.Errorf("taking stacks runs a command in the job's pods, which needs the right to create pods/exec in namespace %s: %w", namespace, firstErr)
		}
		return res, firstErr
	}
	sort.SliceStable(res.Ranks, func(i, j int) bool { return res.Ranks[i].Rank < res.Ranks[j].Rank })
	res.Groups = GroupRanks(res.Ranks)
	res.Contrast = Contrast(res.Groups)
	return res, nil
}

// limited keeps the first maxOutput bytes written and drops the rest.
type limited struct{ bytes.Buffer }

func (l *limited) Write(p []byte) (int, error) {
	if room := maxOutput - l.Len(); room > 0 {
		if len(p) > room {
			l.Buffer.Write(p[:room])
		} else {
			l.Buffer.Write(p)
		}
	}
	return len(p), nil
}

// run runs the collector in pod's node container and returns its output.
func run(ctx context.Context, cfg *rest.Config, cs kubernetes.Interface, namespace, pod string) (string, error) {
	var out limited
	if err := podexec.Run(ctx, cfg, cs, namespace, pod, api.NodeContainer, []string{"sh", "-c", Script}, &out); err != nil {
		return "", err
	}
	return out.String(), nil
}
