package registry

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// fakeRegistry answers the REST calls Register makes, from memory (a unit
// test's mocked API; test/e2e/registry_test.go runs the real registry).
type fakeRegistry struct {
	models, versions map[string]map[string]any // by name
	artifacts        map[string][]map[string]any
	down             bool
	posts            int
}

func (f *fakeRegistry) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.down {
		http.Error(w, "no upstream", http.StatusBadGateway)
		return
	}
	p := strings.TrimPrefix(r.URL.Path, APIPath)
	reply := func(code int, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			panic(err)
		}
		w.WriteHeader(code)
		_, _ = w.Write(b)
	}
	var body map[string]any
	if r.Method == http.MethodPost {
		f.posts++
		_ = json.NewDecoder(r.Body).Decode(&body)
	}
	switch {
	case r.Method == http.MethodGet && p == "/registered_model":
		if m, ok := f.models[r.URL.Query().Get("name")]; ok {
			reply(200, m)
			return
		}
		reply(404, map[string]string{"message": "not found"})
	case r.Method == http.MethodPost && p == "/registered_models":
		body["id"] = strconv.Itoa(len(f.models) + 1)
		f.models[body["name"].(string)] = body
		reply(201, body)
	case r.Method == http.MethodGet && p == "/model_version":
		if v, ok := f.versions[r.URL.Query().Get("parentResourceId")+"/"+r.URL.Query().Get("name")]; ok {
			reply(200, v)
			return
		}
		reply(404, map[string]string{"message": "not found"})
	case r.Method == http.MethodPost && p == "/model_versions":
		body["id"] = "v" + strconv.Itoa(len(f.versions)+1)
		f.versions[body["registeredModelId"].(string)+"/"+body["name"].(string)] = body
		reply(201, body)
	case strings.HasSuffix(p, "/artifacts"):
		id := strings.TrimSuffix(strings.TrimPrefix(p, "/model_versions/"), "/artifacts")
		if r.Method == http.MethodPost {
			body["id"] = "a" + id
			f.artifacts[id] = append(f.artifacts[id], body)
			reply(201, body)
			return
		}
		reply(200, map[string]any{"items": f.artifacts[id]})
	default:
		reply(400, map[string]string{"message": "unexpected " + r.Method + " " + p})
	}
}

func TestRegister(t *testing.T) {
	m := Model{Ref: Ref{Name: "digits", Version: "v1"}, URI: "s3://b/j/model.npz?endpoint=x", Artifact: "model.npz", Format: "numpy",
		Metrics: map[string]float64{"accuracy": 0.96}, Provenance: map[string]string{"uid": "u1", "namespace": "team-a", "job": "j"}}
	version := func(uid string) map[string]any {
		return map[string]any{"id": "v1", "name": "v1", "customProperties": map[string]any{
			"mpijob.uid": map[string]any{"string_value": uid}, "mpijob.namespace": map[string]any{"string_value": "team-b"}, "mpijob.job": map[string]any{"string_value": "other"}}}
	}
	cases := map[string]struct {
		setup     func(f *fakeRegistry)
		want      Result
		wantErr   string
		wantPosts int
	}{
		"a new model": {want: Result{ModelID: "1", VersionID: "v1", ArtifactID: "av1", NewModel: true}, wantPosts: 3},
		"the same job again: nothing written": {
			setup: func(f *fakeRegistry) {
				f.models["digits"] = map[string]any{"id": "1", "name": "digits"}
				f.versions["1/v1"] = version("u1")
				f.artifacts["v1"] = []map[string]any{{"id": "a1", "uri": m.URI}}
			},
			want: Result{ModelID: "1", VersionID: "v1", ArtifactID: "a1", Unchanged: true},
		},
		"a registration stopped half way: the artifact is added": {
			setup: func(f *fakeRegistry) {
				f.models["digits"] = map[string]any{"id": "1", "name": "digits"}
				f.versions["1/v1"] = version("u1")
			},
			want: Result{ModelID: "1", VersionID: "v1", ArtifactID: "av1"}, wantPosts: 1,
		},
		"a version of another job": {
			setup: func(f *fakeRegistry) {
				f.models["digits"] = map[string]any{"id": "1", "name": "digits"}
				f.versions["1/v1"] = version("u2")
			},
			wantErr: "version v1 of model digits exists already (registered from job team-b/other)",
		},
		"the registry down": {setup: func(f *fakeRegistry) { f.down = true }, wantErr: "could not be reached"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := &fakeRegistry{models: map[string]map[string]any{}, versions: map[string]map[string]any{}, artifacts: map[string][]map[string]any{}}
			if tc.setup != nil {
				tc.setup(f)
			}
			srv := httptest.NewServer(f)
			defer srv.Close()
			d, err := NewDirect(srv.URL, "token", "")
			if err != nil {
				t.Fatal(err)
			}
			got, err := Client{T: d}.Register(context.Background(), m)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Register = %+v, %v; want an error with %q", got, err, tc.wantErr)
				}
				var un *UnreachableError
				if f.down && !errors.As(err, &un) {
					t.Errorf("a registry that is down gave %T, want an UnreachableError", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("Register = %+v, want %+v", got, tc.want)
			}
			if f.posts != tc.wantPosts {
				t.Errorf("%d creates, want %d", f.posts, tc.wantPosts)
			}
		})
	}
}

func TestNewDirectRefusesBadInput(t *testing.T) {
	for _, tc := range []struct{ url, ca, want string }{
		{"registry.example.com", "", `--registry-url "registry.example.com"`},
		{"https://r.example.com", "/nonexistent/ca.crt", `--registry-ca "/nonexistent/ca.crt"`},
	} {
		if _, err := NewDirect(tc.url, "", tc.ca); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewDirect(%q, %q) = %v, want an error with %s", tc.url, tc.ca, err, tc.want)
		}
	}
}
