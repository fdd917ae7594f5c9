// Command mpijob-dashboard serves the mpijob dashboard: the web front end
// and its API, acting as each user with their own Kubernetes credentials.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/mpijob/mpijob/dashboard"
)

// settings are the dashboard's command line.
type settings struct {
	listen, kubeconfig, namespacesContext, promURL string
	modelRegistry                                  string
	offerUsers                                     bool
	scrape                                         time.Duration
}

func parseFlags(fs *flag.FlagSet, args []string) (settings, error) {
	var s settings
	fs.StringVar(&s.listen, "listen", "127.0.0.1:9090", "address to serve on")
	fs.StringVar(&s.kubeconfig, "kubeconfig", "", "kubeconfig for the API server's address and CA (empty: in-cluster); users' own tokens are used for every call")
	fs.BoolVar(&s.offerUsers, "offer-kubeconfig-users", false, "offer the kubeconfig's token users on a login page (the local cluster)")
	fs.StringVar(&s.namespacesContext, "namespaces-context", "", "kubeconfig context that lists namespace names for users who may not list namespaces (empty: in-cluster service account; \"-\": none)")
	fs.StringVar(&s.promURL, "prometheus-url", "", "Prometheus that scrapes the kubelets' resource metrics and mpijob-manager, for the job page's Metrics tab (empty: no Metrics tab data)")
	fs.StringVar(&s.modelRegistry, "model-registry", "", "the model registry's Service, NAMESPACE/SERVICE, where the Artifacts tab registers models as the user (empty: $MPIJOB_MODEL_REGISTRY, else model-registry/model-registry)")
	fs.DurationVar(&s.scrape, "prometheus-scrape-interval", 15*time.Second, "how often that Prometheus scrapes (the finest step of a chart)")
	return s, fs.Parse(args)
}

func main() {
	s, _ := parseFlags(flag.CommandLine, os.Args[1:]) // flag.ExitOnError: a bad flag exits
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	// controller-runtime's client logs through the dashboard's own log.
	// Unset, it printed a goroutine's stack after half a minute
	// ("log.SetLogger(...) was never called").
	ctrllog.SetLogger(logr.FromSlogHandler(log.Handler()))
	if err := run(s.listen, s.kubeconfig, s.namespacesContext, s.offerUsers, log, s.promURL, s.scrape, s.modelRegistry); err != nil {
		fmt.Fprintln(os.Stderr, "mpijob-dashboard:", err)
		os.Exit(1)
	}
}

func run(listen, kubeconfig, nsContext string, offerUsers bool, log *slog.Logger, promURL string, scrape time.Duration, modelRegistry string) error {
	var base *rest.Config
	var err error
	if promURL != "" {
		u, perr := url.Parse(promURL)
		if perr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("--prometheus-url %q is not an http(s) URL: give Prometheus's address, for example http://prometheus.monitoring.svc:9090", promURL)
		}
	}
	if scrape < time.Second {
		return fmt.Errorf("--prometheus-scrape-interval %s is too short: give the scrape interval of that Prometheus, for example 15s", scrape)
	}
	if offerUsers {
		if err := dashboard.CheckLocalLogin(listen); err != nil {
			return err
		}
		log.Warn("the login page offers the kubeconfig's users with no credential: for this machine only (it serves on a loopback address); in a cluster use an OAuth proxy", "listen", listen)
	}
	srv := &dashboard.Server{Log: log, PrometheusURL: promURL, ScrapeInterval: scrape, ModelRegistry: modelRegistry}
	if kubeconfig == "" {
		if base, err = rest.InClusterConfig(); err != nil {
			return fmt.Errorf("not in a cluster and no --kubeconfig: %w", err)
		}
	} else {
		raw, err := clientcmd.LoadFromFile(kubeconfig)
		if err != nil {
			return err
		}
		if base, err = clientcmd.NewDefaultClientConfig(*raw, &clientcmd.ConfigOverrides{}).ClientConfig(); err != nil {
			return err
		}
		if offerUsers {
			for name, a := range raw.AuthInfos {
				if a.Token != "" {
					srv.Users = append(srv.Users, dashboard.LoginUser{Name: name, Token: a.Token})
				}
			}
			sort.Slice(srv.Users, func(i, j int) bool { return srv.Users[i].Name < srv.Users[j].Name })
		}
	}
	srv.Base = base
	if nsContext != "-" {
		var nsCfg *rest.Config
		if nsContext == "" {
			nsCfg = base
		} else {
			raw, err := clientcmd.LoadFromFile(kubeconfig)
			if err != nil {
				return err
			}
			if _, ok := raw.Contexts[nsContext]; !ok {
				names := make([]string, 0, len(raw.Contexts))
				for n := range raw.Contexts {
					names = append(names, n)
				}
				sort.Strings(names)
				return fmt.Errorf("--namespaces-context %q is not a context of %s: use one of %s, or - for none", nsContext, kubeconfig, strings.Join(names, ", "))
			}
			if nsCfg, err = clientcmd.NewNonInteractiveClientConfig(*raw, nsContext, &clientcmd.ConfigOverrides{}, nil).ClientConfig(); err != nil {
				return err
			}
		}
		cs, err := kubernetes.NewForConfig(nsCfg)
		if err != nil {
			return err
		}
		srv.Namespaces = func(ctx context.Context) ([]corev1.Namespace, error) {
			list, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			return list.Items, nil
		}
	}
	hs := &http.Server{Addr: listen, Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	log.Info("serving the mpijob dashboard", "url", "http://"+listen)
	if err := hs.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
