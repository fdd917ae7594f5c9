//go:build e2e

package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Alert is one alert of Prometheus's /api/v1/alerts.
type Alert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	State       string            `json:"state"`
}

// Alerts lists the alerts Prometheus has now (pending and firing).
func Alerts(ctx context.Context, promURL string) ([]Alert, error) {
	var body struct {
		Data struct {
			Alerts []Alert `json:"alerts"`
		} `json:"data"`
	}
	if err := getJSON(ctx, promURL, "/api/v1/alerts", &body); err != nil {
		return nil, fmt.Errorf("reading Prometheus's alerts: %w", err)
	}
	return body.Data.Alerts, nil
}

// WaitForFiringAlert waits until Prometheus fires alert name with the
// labels want (a subset of its labels) and returns it; it fails the test
// with the alerts there are on timeout. It skips the test when no
// Prometheus is known (MPIJOB_KUBECONFIG without MPIJOB_PROMETHEUS_URL).
func WaitForFiringAlert(t testing.TB, name string, want map[string]string, timeout time.Duration) Alert {
	t.Helper()
	promURL := PrometheusURL()
	if promURL == "" {
		t.Skip("no Prometheus: set MPIJOB_PROMETHEUS_URL")
	}
	var got Alert
	var seen []Alert
	err := wait.PollUntilContextTimeout(context.Background(), 2*time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		alerts, err := Alerts(ctx, promURL)
		if err != nil {
			return false, nil //nolint:nilerr // Prometheus restarting: poll on
		}
		seen = alerts
		for _, a := range alerts {
			if a.Labels["alertname"] != name || a.State != "firing" {
				continue
			}
			match := true
			for k, v := range want {
				if a.Labels[k] != v {
					match = false
				}
			}
			if match {
				got = a
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		var names []string
		for _, a := range seen {
			names = append(names, fmt.Sprintf("%s %s %v", a.Labels["alertname"], a.State, a.Labels))
		}
		t.Fatalf("Prometheus fired no %s with %v within %s; its alerts: %v", name, want, timeout, names)
	}
	return got
}

// getJSON decodes Prometheus's answer at path into out.
func getJSON(ctx context.Context, promURL, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(promURL, "/")+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("prometheus %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// WaitForAlertEvaluatedOn waits until Prometheus has a sample of query
// (it scraped what an alert reads) and then evaluated the rule group of
// alert name after that sample: from then on the alert is firing or
// pending if its expression holds, and absent if not. A test that says an
// alert did not fire waits for this instead of a guess at the interval.
func WaitForAlertEvaluatedOn(t testing.TB, name, query string, timeout time.Duration) {
	t.Helper()
	promURL := PrometheusURL()
	if promURL == "" {
		t.Skip("no Prometheus: set MPIJOB_PROMETHEUS_URL")
	}
	var sampled time.Time
	var evaluated time.Time
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		if sampled.IsZero() {
			var q struct {
				Data struct {
					Result []struct {
						Value []any `json:"value"`
					} `json:"result"`
				} `json:"data"`
			}
			if err := getJSON(ctx, promURL, "/api/v1/query?query="+url.QueryEscape(query), &q); err != nil || len(q.Data.Result) == 0 {
				return false, nil //nolint:nilerr // not scraped yet, or Prometheus restarting: poll on
			}
			sampled = time.Now()
		}
		var r struct {
			Data struct {
				Groups []struct {
					LastEvaluation time.Time `json:"lastEvaluation"`
					Rules          []struct {
						Name string `json:"name"`
					} `json:"rules"`
				} `json:"groups"`
			} `json:"data"`
		}
		if err := getJSON(ctx, promURL, "/api/v1/rules", &r); err != nil {
			return false, nil //nolint:nilerr // Prometheus restarting: poll on
		}
		for _, g := range r.Data.Groups {
			for _, rule := range g.Rules {
				if rule.Name == name {
					evaluated = g.LastEvaluation
					return g.LastEvaluation.After(sampled), nil
				}
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("Prometheus did not evaluate %s after a sample of %s within %s (sampled at %v, last evaluation %v)", name, query, timeout, sampled, evaluated)
	}
}
