// Package local finds the running local cluster for the benchmarks and
// makes their clients' configurations.
package local

import (
	"context"
	"errors"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/mpijob/mpijob/pkg/localcluster"
)

// Cluster returns the Options of the local cluster of the checkout the
// bench runs in, or an error that says how to start it when it is not
// running.
func Cluster(ctx context.Context) (localcluster.Options, error) {
	wd, err := os.Getwd()
	if err != nil {
		return localcluster.Options{}, err
	}
	opts, err := localcluster.DefaultOptions(wd)
	if err != nil {
		return opts, err
	}
	if ok, msg := localcluster.Status(ctx, opts); !ok {
		return opts, errors.New(msg)
	}
	return opts, nil
}

// Config is a client configuration of the local cluster as user, a
// context of its kubeconfig ("" for the current one, admin), with the
// client-side rate limit qps/burst (0: client-go's default): a bench's own
// clients must not be what sets its pace.
func Config(opts localcluster.Options, user string, qps float32, burst int) (*rest.Config, error) {
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: opts.KubeconfigPath()}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: user}).ClientConfig()
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = qps, burst
	return cfg, nil
}
