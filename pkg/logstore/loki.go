package logstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Client talks to Loki's HTTP API (or a gateway in front of it that
// takes a bearer token, as OpenShift's LokiStack gateway does).
type Client struct {
	// URL is Loki's base URL, e.g. http://10.88.0.1:3101, or a LokiStack
	// gateway's tenant URL, e.g.
	// https://logging-loki-gateway-http.openshift-logging.svc:8080/api/logs/v1/application.
	URL string
	// Token, when set, is sent as a bearer token.
	Token string
	// TokenFile, when set, is read for the bearer token at each request
	// (a pod's ServiceAccount token, which the kubelet renews).
	TokenFile string
	// Tenant, when set, is the store's tenant of every namespace (a
	// LokiStack's "application"); when empty, each namespace is its own
	// tenant. Reads select the namespace by its label either way.
	Tenant string
	HTTP   *http.Client
}

func (c *Client) http() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

// Entry is one stored line.
type Entry struct {
	Time   time.Time
	Line   string
	Labels map[string]string
}

// RefusedError is the store's refusal of a request (a 4xx other than
// 429): asking again gets the same answer.
type RefusedError struct{ Err error }

func (e *RefusedError) Error() string { return e.Err.Error() }
func (e *RefusedError) Unwrap() error { return e.Err }

// PushStream is one stream's lines for Push.
type PushStream struct {
	Labels  map[string]string
	Entries []Entry
}

func (c *Client) do(ctx context.Context, method, path, tenant string, query url.Values, body []byte) ([]byte, error) {
	u := strings.TrimSuffix(c.URL, "/") + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if c.Tenant != "" {
		tenant = c.Tenant
	}
	req.Header.Set("X-Scope-OrgID", tenant)
	token := c.Token
	if c.TokenFile != "" {
		b, err := os.ReadFile(c.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("log store token: %w", err)
		}
		token = strings.TrimSpace(string(b))
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http().Do(req)
	if err != nil {
		return nil, fmt.Errorf("log store %s: %w", c.URL, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return nil, fmt.Errorf("log store %s: %w", c.URL, err)
	}
	if resp.StatusCode/100 != 2 {
		err := fmt.Errorf("log store %s answered %s: %s", path, resp.Status, strings.TrimSpace(string(b)))
		if resp.StatusCode/100 == 4 && resp.StatusCode != http.StatusTooManyRequests {
			return nil, &RefusedError{err}
		}
		return nil, err
	}
	return b, nil
}

// Push stores lines of one tenant (a namespace).
func (c *Client) Push(ctx context.Context, tenant string, streams []PushStream) error {
	type stream struct {
		Stream map[string]string `json:"stream"`
		Values [][]any           `json:"values"`
	}
	var body struct {
		Streams []stream `json:"streams"`
	}
	for _, s := range streams {
		st := stream{Stream: s.Labels}
		for _, e := range s.Entries {
			st.Values = append(st.Values, []any{strconv.FormatInt(e.Time.UnixNano(), 10), e.Line})
		}
		body.Streams = append(body.Streams, st)
	}
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	_, err = c.do(ctx, http.MethodPost, "/loki/api/v1/push", tenant, nil, b)
	return err
}

// PageSize is how many lines one query asks for (the store's
// max_entries_limit_per_query must allow it).
const PageSize = 5000

// Range reads the lines of a LogQL selector between start (inclusive)
// and end (exclusive) in time order, a page at a time; emit gets each
// line once. Lines with the same time keep the store's order.
func (c *Client) Range(ctx context.Context, tenant, logql string, start, end time.Time, emit func(Entry) error) error {
	seenAtLast := map[string]bool{} // lines already emitted at the page's last time
	from := start
	for {
		q := url.Values{
			"query":     {logql},
			"start":     {strconv.FormatInt(from.UnixNano(), 10)},
			"end":       {strconv.FormatInt(end.UnixNano(), 10)},
			"limit":     {strconv.Itoa(PageSize)},
			"direction": {"forward"},
		}
		b, err := c.do(ctx, http.MethodGet, "/loki/api/v1/query_range", tenant, q, nil)
		if err != nil {
			return err
		}
		entries, err := decodeStreams(b)
		if err != nil {
			return err
		}
		var last time.Time
		atLast := map[string]bool{}
		fresh := 0
		for _, e := range entries {
			key := entryKey(e)
			if e.Time.Equal(from) && seenAtLast[key] {
				continue
			}
			if err := emit(e); err != nil {
				return err
			}
			fresh++
			if !e.Time.Equal(last) {
				last, atLast = e.Time, map[string]bool{}
			}
			atLast[key] = true
		}
		if len(entries) < PageSize || fresh == 0 {
			return nil
		}
		if last.Equal(from) {
			for k := range atLast {
				seenAtLast[k] = true
			}
		} else {
			seenAtLast = atLast
		}
		from = last
	}
}

func entryKey(e Entry) string {
	return fmt.Sprintf("%d|%s|%s|%s", e.Time.UnixNano(), e.Labels[LabelPod], e.Labels[LabelContainer], e.Line)
}

// decodeStreams reads a query_range answer of streams into entries in
// time order.
func decodeStreams(b []byte) ([]Entry, error) {
	var resp struct {
		Status string `json:"status"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Stream map[string]string   `json:"stream"`
				Values [][]json.RawMessage `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &resp); err != nil {
		return nil, fmt.Errorf("log store: unreadable answer: %w", err)
	}
	if resp.Data.ResultType != "" && resp.Data.ResultType != "streams" {
		return nil, fmt.Errorf("log store: answer of type %q, want streams", resp.Data.ResultType)
	}
	var out []Entry
	for _, r := range resp.Data.Result {
		for _, v := range r.Values {
			if len(v) < 2 {
				continue
			}
			var ts, line string
			if err := json.Unmarshal(v[0], &ts); err != nil {
				return nil, fmt.Errorf("log store: bad time %s", v[0])
			}
			if err := json.Unmarshal(v[1], &line); err != nil {
				return nil, fmt.Errorf("log store: bad line %s", v[1])
			}
			ns, err := strconv.ParseInt(ts, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("log store: bad time %q", ts)
			}
			out = append(out, Entry{Time: time.Unix(0, ns).UTC(), Line: MessageOf(line), Labels: r.Stream})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.Before(out[j].Time) })
	return out, nil
}
