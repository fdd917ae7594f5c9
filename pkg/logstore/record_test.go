package logstore

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// A stored line is OpenShift Logging 6's record of the program's line,
// and reading it back gives the line as written, whatever it holds.
func TestRecordRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 27, 1, 2, 3, 456789000, time.UTC)
	cases := map[string]string{
		"plain":           "epoch 3 loss 0.25",
		"rank tag":        "[1,3]<stderr>:Traceback (most recent call last):",
		"JSON of its own": `{"message":"not mine","level":"info"}`,
		"quotes":          `say "hi" \ there`,
		"control":         "\x1b[31mred\x1b[0m\ttab",
		"empty":           "",
		"unicode":         "größe ✓ \u202e",
	}
	for name, line := range cases {
		t.Run(name, func(t *testing.T) {
			stored := EncodeRecord(at, line)
			if got := MessageOf(stored); got != line {
				t.Errorf("MessageOf(EncodeRecord(%q)) = %q", line, got)
			}
		})
	}
	if got, want := EncodeRecord(at, "a <b> & c"), `{"@timestamp":"2026-11-27T01:02:03.456789Z","message":"a <b> & c","log_source":"container","log_type":"application"}`; got != want {
		t.Errorf("record %s, want %s", got, want)
	}
}

// What another collector stored as it was (no record) reads as itself;
// so does a line that only looks like a record.
func TestMessageOfLinesThatAreNoRecord(t *testing.T) {
	cases := map[string]struct{ stored, want string }{
		"plain line":             {"hello", "hello"},
		"JSON without message":   {`{"level":"info"}`, `{"level":"info"}`},
		"broken JSON":            {`{"message":"x"`, `{"message":"x"`},
		"message not a string":   {`{"message":3}`, `{"message":3}`},
		"Vector's fuller record": {`{"@timestamp":"2026-11-27T01:02:03Z","hostname":"n1","kubernetes":{"namespace_name":"team-a"},"level":"default","log_type":"application","message":"rank 0 done"}`, "rank 0 done"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := MessageOf(tc.stored); got != tc.want {
				t.Errorf("MessageOf(%s) = %q, want %q", tc.stored, got, tc.want)
			}
		})
	}
}

// The labels are Vector's names of the labelKeys the docs tell an admin to
// list in a ClusterLogForwarder: one list, checked against the other.
func TestLabelsAreVectorsNamesOfTheLabelKeys(t *testing.T) {
	var got []string
	for _, k := range PodLabelKeys {
		got = append(got, VectorLabelName(k))
	}
	want := []string{LabelLogType, LabelNamespace, LabelPod, LabelContainer, LabelJob, LabelRole, LabelIndex, LabelJobSetUID}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want,+got):\n%s", diff)
	}
}

// A LokiStack takes one tenant for every namespace and the manager's own
// ServiceAccount token, read again at each request; a plain Loki takes
// the namespace as the tenant.
func TestClientTenantAndToken(t *testing.T) {
	var tenants, auths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tenants = append(tenants, r.Header.Get("X-Scope-OrgID"))
		auths = append(auths, r.Header.Get("Authorization"))
		_, _ = w.Write([]byte(`{"status":"success","data":{"resultType":"streams","result":[]}}`))
	}))
	defer srv.Close()
	tokenFile := filepath.Join(t.TempDir(), "token")
	read := func(c *Client) {
		t.Helper()
		if err := c.Range(t.Context(), "team-a", `{kubernetes_namespace_name="team-a"}`, time.Unix(0, 0), time.Unix(10, 0), func(Entry) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	read(&Client{URL: srv.URL, Token: "t0"})
	stack := &Client{URL: srv.URL, Tenant: "application", TokenFile: tokenFile}
	for _, tok := range []string{"first\n", "renewed"} {
		if err := os.WriteFile(tokenFile, []byte(tok), 0o600); err != nil {
			t.Fatal(err)
		}
		read(stack)
	}
	if diff := cmp.Diff([]string{"team-a", "application", "application"}, tenants); diff != "" {
		t.Errorf("tenants (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"Bearer t0", "Bearer first", "Bearer renewed"}, auths); diff != "" {
		t.Errorf("tokens (-want,+got):\n%s", diff)
	}
	if err := os.Remove(tokenFile); err != nil {
		t.Fatal(err)
	}
	if err := stack.Range(t.Context(), "team-a", "{}", time.Unix(0, 0), time.Unix(10, 0), func(Entry) error { return nil }); err == nil {
		t.Error("read with the token file gone: no error")
	}
}
