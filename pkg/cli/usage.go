package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/spf13/cobra"

	"github.com/mpijob/mpijob/pkg/usage"
)

// PrometheusURLEnv names the Prometheus (or Thanos querier) usage reads
// when --prometheus-url is not given.
const PrometheusURLEnv = "MPIJOB_PROMETHEUS_URL"

// usageOptions is `kubectl mpijob usage`.
type usageOptions struct {
	*Options
	since         string
	allNamespaces bool
	promURL       string
	output        string
	now           func() time.Time
}

func newUsageCommand(o *Options) *cobra.Command {
	u := &usageOptions{Options: o, now: time.Now}
	cmd := &cobra.Command{
		Use:   "usage",
		Short: "CPU-, memory- and GPU-hours of MPI jobs per namespace, with its cost center",
		Long: "Show what MPI jobs used over a window, per namespace: the CPU-, memory- and GPU-hours their pods asked for (requests, times how long " +
			"the pods were placed) and the CPU-hours they used, with the namespace's cost center (its label mpijob.dev/cost-center). " +
			"It reads the usage recording rules (config/monitoring) from Prometheus: --prometheus-url, or $" + PrometheusURLEnv + ". " +
			"Your kubeconfig's token goes with the query, and the namespace as ?namespace=, so OpenShift's Thanos querier " +
			"(port 9092, tenancy) answers for the namespaces you may read.",
		Example: "  kubectl mpijob usage --prometheus-url http://127.0.0.1:9459\n" +
			"  kubectl mpijob usage -A --since 30d\n" +
			"  kubectl mpijob usage -n team-a --since 12h -o json",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			since, err := u.Validate()
			if err != nil {
				return err
			}
			return u.Run(cmd.Context(), since)
		},
	}
	cmd.Flags().StringVar(&u.since, "since", "7d", "the window: a whole number and m, h, d or w (at most 90d)")
	cmd.Flags().BoolVarP(&u.allNamespaces, "all-namespaces", "A", false, "every namespace's usage (an administrator's view)")
	cmd.Flags().StringVar(&u.promURL, "prometheus-url", "", "Prometheus (or Thanos querier) with mpijob's recording rules (default $"+PrometheusURLEnv+")")
	cmd.Flags().StringVarP(&u.output, "output", "o", "", "json: the rows as a JSON list")
	return cmd
}

// Validate checks the flags and returns the window.
func (u *usageOptions) Validate() (time.Duration, error) {
	since, err := usage.ParseSince(u.since)
	if err != nil {
		return 0, usageErr("--since %v", err)
	}
	if u.output != "" && u.output != "json" {
		return 0, usageErr("--output %q: use json, or leave it out for a table", u.output)
	}
	if u.promURL, err = prometheusURL(u.promURL); err != nil {
		return 0, err
	}
	return since, nil
}

// prometheusURL is --prometheus-url (flag), else $MPIJOB_PROMETHEUS_URL,
// checked: the Prometheus usage and top read.
func prometheusURL(flag string) (string, error) {
	u := flag
	if u == "" {
		u = os.Getenv(PrometheusURLEnv)
	}
	if u == "" {
		return "", usageErr("no Prometheus to read from: give --prometheus-url (the local cluster's is http://127.0.0.1:9459; on OpenShift, the Thanos querier's tenancy port, https://thanos-querier.openshift-monitoring.svc:9092) or set $%s", PrometheusURLEnv)
	}
	if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		return "", usageErr("--prometheus-url %q is not an http(s) URL: give Prometheus's address, e.g. http://127.0.0.1:9459", u)
	}
	return u, nil
}

// prometheus is the query API of the Prometheus at promURL as the user:
// their token, and namespace ns ("" for every one) for a tenancy-aware
// querier.
func (c *clients) prometheus(promURL, ns string) (promv1.API, error) {
	token := ""
	if c.cfg != nil {
		token = c.cfg.BearerToken
	}
	pc, err := promapi.NewClient(promapi.Config{Address: promURL, RoundTripper: tenancy{ns: ns, token: token, next: http.DefaultTransport}})
	if err != nil {
		return nil, usageErr("--prometheus-url %q: %v", promURL, err)
	}
	return promv1.NewAPI(pc), nil
}

// Run asks Prometheus and prints a row per namespace.
func (u *usageOptions) Run(ctx context.Context, since time.Duration) error {
	cl, err := u.clients()
	if err != nil {
		return err
	}
	ns := cl.namespace
	if u.allNamespaces {
		ns = ""
	}
	prom, err := cl.prometheus(u.promURL, ns)
	if err != nil {
		return err
	}
	rows, err := usage.Read(ctx, prom, ns, since, u.now())
	if err != nil {
		return fmt.Errorf("prometheus at %s did not answer: %w (is it the Prometheus with mpijob's recording rules? kubectl mpijob doctor checks the cluster)", u.promURL, err)
	}
	if u.output == "json" {
		enc := json.NewEncoder(u.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	if len(rows) == 0 {
		where := "namespace " + ns
		if ns == "" {
			where = "any namespace"
		}
		fmt.Fprintf(u.ErrOut, "No MPI job ran in %s in the last %s (as Prometheus at %s recorded it).\n", where, u.since, u.promURL)
		return nil
	}
	w := tabwriter.NewWriter(u.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAMESPACE\tCOST CENTER\tCPU-HOURS\tUSED CPU-HOURS\tMEMORY GiB-HOURS\tGPU-HOURS")
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Namespace, orDash(r.CostCenter), hours(r.CPUHours), hours(r.CPUUsedHours), hours(r.MemoryGiBHours), hours(r.GPUHours))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(u.ErrOut, "Over the last %s: what the pods asked for (requests) times how long they were placed; USED CPU-HOURS is what they used.\n", u.since)
	return nil
}

// hours prints resource-hours with the precision a small job needs.
func hours(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v < 10:
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// tenancy sends the user's token and, for one namespace, ?namespace=:
// what OpenShift's Thanos querier (tenancy port) needs to answer for the
// namespaces the user may read. A plain Prometheus ignores both.
type tenancy struct {
	ns, token string
	next      http.RoundTripper
}

func (t tenancy) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if t.token != "" {
		r.Header.Set("Authorization", "Bearer "+t.token)
	}
	if t.ns != "" {
		q := r.URL.Query()
		q.Set("namespace", t.ns)
		r.URL.RawQuery = q.Encode()
	}
	return t.next.RoundTrip(r)
}
