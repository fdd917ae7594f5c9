package localcluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/dataconn"
	"github.com/mpijob/mpijob/pkg/manifests"
)

// S3Endpoint is the local object store as pods and this machine reach it:
// the pod network's bridge address.
var S3Endpoint = fmt.Sprintf("http://%s:%d", DNSAddress, S3Port)

// S3Region is the region the local object store answers for.
const S3Region = "us-east-1"

// DataConnectionName is the data connection (an OpenShift AI S3
// connection Secret) every tenant namespace of the local cluster gets.
const DataConnectionName = "local-s3"

// DigitsDatasetKey is where scikit-learn's digits data lies in every
// tenant's bucket (copied from the OpenMPI image's python3-sklearn).
const DigitsDatasetKey = "datasets/digits/digits.csv.gz"

// digitsInImage is the file python3-sklearn ships in the OpenMPI image.
const digitsInImage = "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz"

// S3Tenant is one tenant's account on the local object store: its own
// keys and bucket; no tenant can read another's bucket.
type S3Tenant struct {
	Namespace, Bucket, AccessKey, SecretKey string
}

// tenantNamespaces are the namespaces that get an account, a bucket and a
// data connection: those of the users who may edit one.
func tenantNamespaces() []string {
	var out []string
	seen := map[string]bool{}
	for _, u := range Users {
		if u.ClusterRole == "edit" && !seen[u.Namespace] {
			seen[u.Namespace] = true
			out = append(out, u.Namespace)
		}
	}
	return out
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// startS3 starts the object store (versitygw with its own IAM, objects
// under the state folder), gives every tenant namespace an account, a
// bucket and the data connection Secret, and puts the digits dataset in
// each bucket.
func (c *Cluster) startS3(ctx context.Context) error {
	dir := c.opts.path("s3")
	for _, d := range []string{filepath.Join(dir, "data"), filepath.Join(dir, "iam")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	rootKey, err := randomHex(10)
	if err != nil {
		return err
	}
	rootSecret, err := randomHex(20)
	if err != nil {
		return err
	}
	// The root keys travel in the environment, not on the command line,
	// so no process listing shows them.
	env := []string{"ROOT_ACCESS_KEY_ID=" + rootKey, "ROOT_SECRET_ACCESS_KEY=" + rootSecret}
	args := []string{
		"--port", fmt.Sprintf("%s:%d", DNSAddress, S3Port),
		"--admin-port", fmt.Sprintf("127.0.0.1:%d", s3AdminPort),
		"--region", S3Region,
		"--iam-dir", filepath.Join(dir, "iam"),
		"--health", "/health",
		"--quiet",
		"posix", filepath.Join(dir, "data"),
	}
	if err := c.startProcess("s3", c.opts.bin("versitygw"), args, env); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "s3", 30*time.Second, func(ctx context.Context) bool {
		return httpOK(ctx, S3Endpoint+"/health")
	}); err != nil {
		return err
	}
	admin := func(args ...string) error {
		cmd := exec.CommandContext(ctx, c.opts.bin("versitygw"), append([]string{"admin", "--endpoint-url", fmt.Sprintf("http://127.0.0.1:%d", s3AdminPort)}, args...)...)
		cmd.Env = append(os.Environ(), "ADMIN_ACCESS_KEY_ID="+rootKey, "ADMIN_SECRET_ACCESS_KEY="+rootSecret)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("object store admin %s: %w: %s", args[0], err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	cl, err := c.newClient()
	if err != nil {
		return err
	}
	var dataset []byte
	if !c.opts.SkipImages {
		out, err := RunOnHost(ctx, c.opts, Images[0].Ref, nil, "base64", "-w0", digitsInImage)
		if err != nil {
			return fmt.Errorf("failed to read the digits dataset from %s: %w", Images[0].Ref, err)
		}
		if dataset, err = base64.StdEncoding.DecodeString(strings.TrimSpace(out)); err != nil {
			return fmt.Errorf("failed to read the digits dataset from %s: %w", Images[0].Ref, err)
		}
	}
	for _, ns := range tenantNamespaces() {
		secret, err := randomHex(20)
		if err != nil {
			return err
		}
		t := S3Tenant{Namespace: ns, Bucket: ns, AccessKey: ns, SecretKey: secret}
		if err := admin("create-user", "--access", t.AccessKey, "--secret", t.SecretKey, "--role", "user"); err != nil {
			return err
		}
		if err := admin("create-bucket", "--bucket", t.Bucket, "--owner", t.AccessKey); err != nil {
			return err
		}
		if err := applyObject(ctx, cl, connectionSecret(t)); err != nil {
			return fmt.Errorf("failed to create data connection %s/%s: %w", ns, DataConnectionName, err)
		}
		if dataset != nil {
			if err := putObject(ctx, t, DigitsDatasetKey, dataset); err != nil {
				return fmt.Errorf("failed to put the digits dataset in bucket %s: %w", t.Bucket, err)
			}
		}
	}
	return nil
}

// connectionSecret is tenant t's data connection, as OpenShift AI's
// dashboard makes one.
func connectionSecret(t S3Tenant) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{
			Name: DataConnectionName, Namespace: t.Namespace,
			Labels: map[string]string{dataconn.DashboardLabel: "true"},
			Annotations: map[string]string{
				dataconn.ConnectionTypeAnnotation: dataconn.TypeS3,
				"openshift.io/display-name":       "Local S3 (bucket " + t.Bucket + ")",
			},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{
			dataconn.AccessKeyID:     []byte(t.AccessKey),
			dataconn.SecretAccessKey: []byte(t.SecretKey),
			dataconn.Region:          []byte(S3Region),
			dataconn.Endpoint:        []byte(S3Endpoint),
			dataconn.Bucket:          []byte(t.Bucket),
		},
	}
}

func applyObject(ctx context.Context, cl client.Client, obj client.Object) error {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return err
	}
	return manifests.Apply(ctx, cl, fieldOwner, []*unstructured.Unstructured{{Object: m}})
}

func putObject(ctx context.Context, t S3Tenant, key string, body []byte) error {
	mc, err := minio.New(strings.TrimPrefix(S3Endpoint, "http://"), &minio.Options{
		Creds: credentials.NewStaticV4(t.AccessKey, t.SecretKey, ""), Region: S3Region,
	})
	if err != nil {
		return err
	}
	_, err = mc.PutObject(ctx, t.Bucket, key, bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{})
	return err
}
