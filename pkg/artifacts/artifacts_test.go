package artifacts

import (
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/mpijob/mpijob/config"
	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/dataconn"
	"github.com/mpijob/mpijob/pkg/jobspec"
)

// s3 answers the few S3 calls a Store makes (ListObjectsV2, GetObject
// and its HEAD) for one bucket, with S3's own error codes: enough to see
// what a user is told, not a store to test against (the e2e tests read
// the local cluster's real one).
type s3 struct {
	bucket  string
	objects map[string]string
	modTime time.Time
	// deny answers every request with AccessDenied.
	deny bool
}

func (f *s3) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	fail := func(code int, s3code, msg string) {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(code)
		if r.Method != http.MethodHead {
			fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message></Error>`, s3code, msg)
		}
	}
	if f.deny {
		fail(http.StatusForbidden, "AccessDenied", "Access Denied.")
		return
	}
	bucket, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if bucket != f.bucket {
		fail(http.StatusNotFound, "NoSuchBucket", "The specified bucket does not exist")
		return
	}
	if key == "" { // a list
		type content struct {
			Key          string
			Size         int64
			LastModified string
		}
		var res struct {
			XMLName     xml.Name `xml:"ListBucketResult"`
			Name        string
			Prefix      string
			KeyCount    int
			IsTruncated bool
			Contents    []content
		}
		res.Name, res.Prefix = f.bucket, r.URL.Query().Get("prefix")
		for k, v := range f.objects {
			if strings.HasPrefix(k, res.Prefix) {
				res.Contents = append(res.Contents, content{Key: k, Size: int64(len(v)), LastModified: f.modTime.Format(time.RFC3339)})
			}
		}
		res.KeyCount = len(res.Contents)
		w.Header().Set("Content-Type", "application/xml")
		_ = xml.NewEncoder(w).Encode(res)
		return
	}
	body, ok := f.objects[key]
	if !ok {
		fail(http.StatusNotFound, "NoSuchKey", "The specified key does not exist.")
		return
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.Header().Set("Last-Modified", f.modTime.Format(http.TimeFormat))
	w.Header().Set("ETag", `"e"`)
	if r.Method != http.MethodHead {
		_, _ = io.WriteString(w, body)
	}
}

func baseRuntime(t *testing.T) *trainer.ClusterTrainingRuntime {
	t.Helper()
	rt, err := config.Runtime("mpi-openmpi")
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// job builds MPI job name as the CLI does, with its data connections.
func job(t *testing.T, name string, conns []string) []client.Object {
	t.Helper()
	j, err := jobspec.Build(jobspec.Input{Name: name, Namespace: "team-a", Workers: 1, DataConnections: conns}, baseRuntime(t))
	if err != nil {
		t.Fatal(err)
	}
	out := []client.Object{j.TrainJob}
	if j.Runtime != nil {
		out = append(out, j.Runtime)
	}
	return out
}

func connection(name, endpoint, bucket string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a",
		Labels:      map[string]string{"opendatahub.io/dashboard": "true"},
		Annotations: map[string]string{"opendatahub.io/connection-type": "s3"}},
		Data: map[string][]byte{dataconn.AccessKeyID: []byte("AKIAEXAMPLE"), dataconn.SecretAccessKey: []byte("secret-example"),
			dataconn.Endpoint: []byte(endpoint), dataconn.Bucket: []byte(bucket)}}
}

// Open finds a job's artifacts on its first data connection, read with the
// user's client; List and Open read them; every failure names the
// connection, the key to fix or what to do.
func TestOpenListAndRead(t *testing.T) {
	mod := time.Date(2026, 11, 27, 6, 0, 0, 0, time.UTC)
	store := &s3{bucket: "results", modTime: mod, objects: map[string]string{
		"digits/model.pt": "weights", "digits/metrics.json": `{"accuracy": 0.98}`, "other-job/model.pt": "not this job's"}}
	srv := httptest.NewServer(store)
	defer srv.Close()

	objs := append(job(t, "digits", []string{"bucket"}), connection("bucket", srv.URL, "results"))
	c := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(objs...).Build()
	tj := objs[0].(*trainer.TrainJob)
	src, err := Open(context.Background(), c, nil, tj, WithTransport(http.DefaultTransport))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer func() { _ = src.Close() }()
	if diff := cmp.Diff(Location{Connection: "bucket", URI: "s3://results/digits/"}, src.Location()); diff != "" {
		t.Errorf("Location (-want,+got):\n%s", diff)
	}
	list, err := src.List(context.Background())
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	want := []Object{{Name: "metrics.json", Size: 18, LastModified: mod}, {Name: "model.pt", Size: 7, LastModified: mod}}
	if diff := cmp.Diff(want, list); diff != "" {
		t.Errorf("List: only the job's own, by name (-want,+got):\n%s", diff)
	}
	rc, size, err := src.Open(context.Background(), "model.pt")
	if err != nil {
		t.Fatalf("Open model.pt: %v", err)
	}
	b, _ := io.ReadAll(rc)
	_ = rc.Close()
	if string(b) != "weights" || size != 7 {
		t.Errorf("model.pt: %q (%d bytes), want \"weights\" (7)", b, size)
	}
	for name, wantErr := range map[string]string{
		"missing.pt":            `artifact "missing.pt" is not in s3://results/digits/: list them with kubectl mpijob artifacts`,
		"../other-job/model.pt": `name an artifact as the list shows it`,
		"":                      `name an artifact as the list shows it`,
	} {
		if _, _, err := src.Open(context.Background(), name); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("Open %q: %v, want %q", name, err, wantErr)
		}
	}

	// The store refuses the keys, or the bucket is not there: said with
	// the key of the connection to fix.
	store.deny = true
	if _, err := src.List(context.Background()); err == nil || !strings.Contains(err.Error(), "refused the keys for bucket results (AccessDenied): fix AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the connection") {
		t.Errorf("List with refused keys: %v", err)
	}
	store.deny, store.bucket = false, "elsewhere"
	if _, err := src.List(context.Background()); err == nil || !strings.Contains(err.Error(), "bucket results does not exist at "+srv.URL+": fix AWS_S3_BUCKET") {
		t.Errorf("List of a missing bucket: %v", err)
	}
	srv.Close()
	if _, err := src.List(context.Background()); err == nil || !strings.Contains(err.Error(), "cannot reach "+srv.URL+" (check AWS_S3_ENDPOINT in the connection)") {
		t.Errorf("List of an endpoint that does not answer: %v", err)
	}
}

// What keeps a job's artifacts from being read is said in the user's
// terms: no storage at all, a connection gone or not the user's to read,
// a connection without an endpoint.
func TestOpenSaysWhyNot(t *testing.T) {
	forbidden := interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if _, ok := obj.(*corev1.Secret); ok {
			return apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, key.Name, fmt.Errorf("no"))
		}
		return c.Get(ctx, key, obj, opts...)
	}}
	cases := map[string]struct {
		objs    []client.Object
		funcs   *interceptor.Funcs
		want    string
		noStore bool
	}{
		"no data connection or PVC": {
			objs: job(t, "plain", nil), noStore: true,
			want: "MPI job plain has no data connection or PVC, so it has no artifacts to list; create the job with --data-connection NAME or --pvc CLAIM",
		},
		"a connection gone": {
			objs: job(t, "gone", []string{"bucket"}),
			want: "data connection bucket of MPI job gone is gone from namespace team-a: recreate it to read the artifacts",
		},
		"a connection the user may not read": {
			objs: append(job(t, "secret", []string{"bucket"}), connection("bucket", "http://s3.example:9000", "b")), funcs: &forbidden,
			want: "you may not read data connection bucket (Secret team-a/bucket), so you cannot read the artifacts of MPI job secret",
		},
		"a connection without an endpoint": {
			objs: append(job(t, "noep", []string{"bucket"}), connection("bucket", "", "b")),
			want: dataconn.Endpoint,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(tc.objs...)
			if tc.funcs != nil {
				b = b.WithInterceptorFuncs(*tc.funcs)
			}
			_, err := Open(context.Background(), b.Build(), nil, tc.objs[0].(*trainer.TrainJob))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open: %v, want %q", err, tc.want)
			}
			if IsNoStorage(err) != tc.noStore {
				t.Errorf("IsNoStorage = %v, want %v", IsNoStorage(err), tc.noStore)
			}
		})
	}
}
