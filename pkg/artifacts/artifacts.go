// Package artifacts reads what an MPI job wrote to its $MPIJOB_OUTPUT_URI:
// the objects under s3://BUCKET/JOB/ on its first data connection, or the
// files under /mnt/CLAIM/JOB/ on its PVC. Everything is read with the
// caller's client, so the CLI and the dashboard read as the user: who
// cannot read the connection's Secret cannot read the objects, and who
// cannot start a pod that mounts the claim cannot read the files.
package artifacts

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"sort"
	"strings"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/dataconn"
	"github.com/mpijob/mpijob/pkg/jobspec"
)

// Object is one artifact.
type Object struct {
	// Name is the object's key under the job's prefix, e.g. model.npz.
	Name         string    `json:"name"`
	Size         int64     `json:"size"`
	LastModified time.Time `json:"lastModified"`
}

// Store is where one job's artifacts are.
type Store struct {
	// Connection is the data connection's name; URI is s3://BUCKET/JOB/.
	Connection, URI string
	Endpoint        string
	bucket, prefix  string
	region          string
	client          *minio.Client
}

// Object says where artifact name lies: its bucket and key, and the
// endpoint and region of the store (what a model registry's URI names).
func (s *Store) Object(name string) (bucket, key, endpoint, region string) {
	return s.bucket, s.prefix + name, s.Endpoint, s.region
}

// NoStorageError says a job has no data connection to read artifacts
// from, and where its artifacts are instead.
type NoStorageError struct{ Msg string }

func (e *NoStorageError) Error() string { return e.Msg }

// IsNoStorage reports a NoStorageError.
func IsNoStorage(err error) bool {
	var e *NoStorageError
	return errors.As(err, &e)
}

// IsCheckpoint reports whether an object under a job's folder is one of
// its checkpoints ($MPIJOB_CHECKPOINT_URI, checkpoints/): the job's
// working state for a resume, not an artifact, so listings leave them out.
func IsCheckpoint(name string) bool { return strings.HasPrefix(name, dataconn.CheckpointDir) }

// Source is where one job's artifacts are: an S3 prefix (Store) or a
// folder on a PVC (PVCStore).
type Source interface {
	// List lists the artifacts, by name.
	List(ctx context.Context) ([]Object, error)
	// Open reads one artifact, named as List shows it.
	Open(ctx context.Context, name string) (io.ReadCloser, int64, error)
	// Location says where they are.
	Location() Location
	// Close lets go of what reading took (a PVC's reader pod).
	Close() error
}

// Location says where a job's artifacts are: on a data connection or a
// PVC, at URI (s3://BUCKET/JOB/ or pvc://CLAIM/JOB/).
type Location struct {
	Connection string `json:"connection,omitempty"`
	Claim      string `json:"claim,omitempty"`
	URI        string `json:"uri"`
}

// Open finds where job tj wrote its artifacts, as its $MPIJOB_OUTPUT_URI
// says: the first data connection of its runtime, read with c (the user's
// client), or else its first PVC, read through a pod that c creates and
// cfg execs into (cfg nil: PVCs cannot be read).
//
// opts are for a reader that runs on a server (the dashboard):
// WithTransport names how it reaches a connection's endpoint.
func Open(ctx context.Context, c client.Client, cfg *rest.Config, tj *trainer.TrainJob, opts ...Option) (Source, error) {
	rt, err := runtimeOfJob(ctx, c, tj)
	if err != nil {
		return nil, err
	}
	var conns []string
	var pvcs []dataconn.PVC
	if rt != nil {
		conns, pvcs = jobspec.StorageOf(&rt.Spec)
	}
	if len(conns) == 0 {
		if len(pvcs) > 0 {
			return NewPVC(c, cfg, tj, pvcs[0], readerTemplate(&rt.Spec))
		}
		return nil, &NoStorageError{Msg: fmt.Sprintf("MPI job %s has no data connection or PVC, so it has no artifacts to list; create the job with --data-connection NAME or --pvc CLAIM (SDK: data_connection= or pvc=) and have it write to $%s", tj.Name, dataconn.OutputEnv)}
	}
	name := conns[0]
	s := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: tj.Namespace, Name: name}, s); err != nil {
		switch {
		case apierrors.IsNotFound(err):
			return nil, fmt.Errorf("data connection %s of MPI job %s is gone from namespace %s: recreate it to read the artifacts", name, tj.Name, tj.Namespace)
		case apierrors.IsForbidden(err):
			return nil, fmt.Errorf("you may not read data connection %s (Secret %s/%s), so you cannot read the artifacts of MPI job %s: ask for a role that reads Secrets in %s", name, tj.Namespace, name, tj.Name, tj.Namespace)
		}
		return nil, fmt.Errorf("failed to read data connection %s/%s: %w", tj.Namespace, name, err)
	}
	if p := dataconn.Check(name, s.Labels, s.Annotations, s.Data); p != nil {
		return nil, p
	}
	return New(name, s.Data, tj.Name, opts...)
}

// Option changes how a store is reached.
type Option func(*minio.Options)

// WithTransport reaches the endpoint through rt (NoLocalTransport on a
// server), trying each request once: a server does not knock on a
// tenant's endpoint ten times (the client's default) for one page.
func WithTransport(rt http.RoundTripper) Option {
	return func(o *minio.Options) { o.Transport, o.MaxRetries = rt, 1 }
}

// New is the store of job on a connection's keys.
func New(connection string, data map[string][]byte, job string, opts ...Option) (*Store, error) {
	ep := strings.TrimSpace(string(data[dataconn.Endpoint]))
	u, err := url.Parse(ep)
	if err != nil || u.Host == "" {
		return nil, &dataconn.Problem{Connection: connection, Key: dataconn.Endpoint, Problem: fmt.Sprintf("%q is not an endpoint URL", ep)}
	}
	region := strings.TrimSpace(string(data[dataconn.Region]))
	if region == "" {
		region = "us-east-1"
	}
	mo := &minio.Options{
		Creds:  credentials.NewStaticV4(strings.TrimSpace(string(data[dataconn.AccessKeyID])), strings.TrimSpace(string(data[dataconn.SecretAccessKey])), ""),
		Secure: u.Scheme == "https", Region: region,
	}
	for _, o := range opts {
		o(mo)
	}
	mc, err := minio.New(u.Host, mo)
	if err != nil {
		return nil, err
	}
	bucket := strings.TrimSpace(string(data[dataconn.Bucket]))
	return &Store{
		Connection: connection, Endpoint: ep, bucket: bucket, prefix: job + "/", region: region,
		URI: "s3://" + bucket + "/" + job + "/", client: mc,
	}, nil
}

// Location says where the artifacts are.
func (s *Store) Location() Location { return Location{Connection: s.Connection, URI: s.URI} }

// Close has nothing to let go of.
func (s *Store) Close() error { return nil }

// List lists the artifacts, by name.
func (s *Store) List(ctx context.Context) ([]Object, error) {
	var out []Object
	for o := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: s.prefix, Recursive: true}) {
		if o.Err != nil {
			return nil, s.explain(o.Err)
		}
		name := strings.TrimPrefix(o.Key, s.prefix)
		if IsCheckpoint(name) {
			continue
		}
		out = append(out, Object{Name: name, Size: o.Size, LastModified: o.LastModified})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Open reads one artifact by name.
func (s *Store) Open(ctx context.Context, name string) (io.ReadCloser, int64, error) {
	clean := path.Clean("/" + name)[1:]
	if clean == "" || clean != name {
		return nil, 0, fmt.Errorf("artifact %q: name an artifact as the list shows it, e.g. model.npz", name)
	}
	obj, err := s.client.GetObject(ctx, s.bucket, s.prefix+clean, minio.GetObjectOptions{})
	if err != nil {
		return nil, 0, s.explain(err)
	}
	st, err := obj.Stat()
	if err != nil {
		_ = obj.Close()
		if minio.ToErrorResponse(err).Code == "NoSuchKey" {
			return nil, 0, fmt.Errorf("artifact %q is not in %s: list them with kubectl mpijob artifacts", name, s.URI)
		}
		return nil, 0, s.explain(err)
	}
	return obj, st.Size, nil
}

// explain turns the store's error into one that names the connection.
func (s *Store) explain(err error) error {
	r := minio.ToErrorResponse(err)
	switch r.Code {
	case "NoSuchBucket":
		return fmt.Errorf("data connection %s: bucket %s does not exist at %s: fix AWS_S3_BUCKET in the connection", s.Connection, s.bucket, s.Endpoint)
	case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch":
		return fmt.Errorf("data connection %s: %s refused the keys for bucket %s (%s): fix AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the connection", s.Connection, s.Endpoint, s.bucket, r.Code)
	case "":
		var local *LocalAddressError
		if errors.As(err, &local) {
			return fmt.Errorf("data connection %s: %s: fix AWS_S3_ENDPOINT in the connection", s.Connection, local.Error())
		}
		return fmt.Errorf("data connection %s: cannot reach %s (check AWS_S3_ENDPOINT in the connection): %w", s.Connection, s.Endpoint, err)
	}
	return fmt.Errorf("data connection %s: %s: %s", s.Connection, s.Endpoint, r.Message)
}

// runtimeOfJob reads tj's per-job runtime (nil for a cluster runtime,
// which has no storage).
func runtimeOfJob(ctx context.Context, c client.Reader, tj *trainer.TrainJob) (*trainer.TrainingRuntime, error) {
	if ptr.Deref(tj.Spec.RuntimeRef.Kind, "") != trainer.TrainingRuntimeKind {
		return nil, nil
	}
	rt := &trainer.TrainingRuntime{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: tj.Namespace, Name: tj.Spec.RuntimeRef.Name}, rt); err != nil {
		return nil, fmt.Errorf("failed to read the runtime of MPI job %s: %w", tj.Name, err)
	}
	return rt, nil
}

// readerTemplate is the pod spec a PVC reader borrows from: the
// Launcher's (a CPU pod), else the Worker's.
func readerTemplate(spec *trainer.TrainingRuntimeSpec) *corev1.PodSpec {
	var out *corev1.PodSpec
	for i := range spec.Template.Spec.ReplicatedJobs {
		rj := &spec.Template.Spec.ReplicatedJobs[i]
		switch rj.Name {
		case api.LauncherJob:
			return &rj.Template.Spec.Template.Spec
		case api.WorkerJob:
			out = &rj.Template.Spec.Template.Spec
		}
	}
	if out == nil {
		out = &corev1.PodSpec{}
	}
	return out
}
