package cli

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// usage asks Prometheus the usage rules' queries for the namespace (with
// ?namespace= for a tenancy-aware querier) and prints a row per namespace;
// bad flags are refused, naming them.
func TestUsageVerb(t *testing.T) {
	var mu sync.Mutex
	var queries, namespaces []string
	prom := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		mu.Lock()
		queries, namespaces = append(queries, r.Form.Get("query")), append(namespaces, r.URL.Query().Get("namespace"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if strings.Contains(r.Form.Get("query"), "resource") {
			_, _ = w.Write([]byte(`{"status":"success","data":{"resultType":"vector","result":[
				{"metric":{"namespace":"team-a","cost_center":"cc-7","resource":"cpu"},"value":[1,"4.5"]},
				{"metric":{"namespace":"team-a","cost_center":"cc-7","resource":"nvidia.com/gpu"},"value":[1,"0.0333"]}]}}`))
			return
		}
		_, _ = w.Write([]byte(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"namespace":"team-a","cost_center":"cc-7"},"value":[1,"1.25"]}]}}`))
	}))
	defer prom.Close()
	o, out, _ := fakeOptions(t, interceptor.Funcs{})
	u := &usageOptions{Options: o, since: "7d", promURL: prom.URL, now: func() time.Time { return time.Unix(1800000000, 0) }}
	since, err := u.Validate()
	if err != nil {
		t.Fatal(err)
	}
	if err := u.Run(context.Background(), since); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "NAMESPACE") || strings.Join(strings.Fields(lines[1]), " ") != "team-a cc-7 4.500 1.250 0 0.033" {
		t.Errorf("usage:\n%s", out)
	}
	if len(queries) != 2 || !strings.Contains(queries[0], `{namespace="team-a"}[1w]`) || namespaces[0] != "team-a" {
		t.Errorf("queries %q with namespace %q, want team-a's over 1w", queries, namespaces)
	}

	for name, tc := range map[string]struct {
		u    usageOptions
		want string
	}{
		"a window in words":    {usageOptions{since: "7 days", promURL: prom.URL}, `--since "7 days" is not a window`},
		"no Prometheus":        {usageOptions{since: "7d"}, "no Prometheus to read from: give --prometheus-url"},
		"a URL with no scheme": {usageOptions{since: "7d", promURL: "prometheus:9090"}, `--prometheus-url "prometheus:9090" is not an http(s) URL`},
		"yaml":                 {usageOptions{since: "7d", promURL: prom.URL, output: "yaml"}, `--output "yaml": use json`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(PrometheusURLEnv, "")
			_, err := tc.u.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate: %v, want %q", err, tc.want)
			}
		})
	}
}
