package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"

	"github.com/mpijob/mpijob/pkg/certs"
	"github.com/mpijob/mpijob/pkg/logstore"
)

// The Secret mpijob-log-store's keys: "serviceaccount" is the manager's
// own token file, a tenant is kept, and a CA that is no PEM is refused
// with the key named.
func TestLogStoreClient(t *testing.T) {
	c, err := logStoreClient("https://gw:8080/api/logs/v1/application", " serviceaccount\n", "application", "")
	if err != nil {
		t.Fatal(err)
	}
	if c.TokenFile != serviceAccountTokenFile || c.Token != "" || c.Tenant != "application" {
		t.Errorf("token file %q, token %q, tenant %q", c.TokenFile, c.Token, c.Tenant)
	}
	c, err = logStoreClient("http://loki:3100", "abc", "", "")
	if err != nil {
		t.Fatal(err)
	}
	if c.Token != "abc" || c.TokenFile != "" || c.Tenant != "" {
		t.Errorf("token %q, token file %q, tenant %q", c.Token, c.TokenFile, c.Tenant)
	}
	if _, err := logStoreClient("https://gw", "", "", "not a certificate"); err == nil || !strings.Contains(err.Error(), "ca.crt") {
		t.Errorf("a CA that is no PEM: %v, want an error naming ca.crt", err)
	}
}

// Start reads the API server's front-proxy settings, waits for the
// certificate, serves, and stops with its context.
func TestLogAPIStartsAndStops(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "front-proxy-ca"}, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	cs := kubefake.NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "extension-apiserver-authentication"},
		Data: map[string]string{"requestheader-client-ca-file": ca, "requestheader-username-headers": `["X-Remote-User"]`}})
	ready := make(chan struct{})
	close(ready)
	l := &logAPI{api: &logstore.API{Store: &logstore.Client{URL: "http://loki:3100"}}, kube: cs, cert: &certs.Lazy{}, ready: ready, port: 0}
	if l.NeedLeaderElection() {
		t.Error("the log API is served by every replica, not only the leader")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Start(ctx) }()
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return l.api.Header.Load() != nil, nil
	}); err != nil {
		t.Fatal("the front-proxy settings were never read")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Start after its context ended: %v", err)
	}
}

// jobSetOf finds the job's JobSet, and says when there is none.
func TestJobSetOf(t *testing.T) {
	scheme, err := newScheme()
	if err != nil {
		t.Fatal(err)
	}
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "cnn", UID: "js-1", CreationTimestamp: metav1.NewTime(time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC))}}
	// A job stopped by its deadline: Trainer deleted its JobSet, the
	// TrainJob stays, and its lines are read by name from its creation.
	timedOut := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "timed-out", CreationTimestamp: metav1.NewTime(time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC))}}
	find := jobSetOf(fake.NewClientBuilder().WithScheme(scheme).WithObjects(js, timedOut).Build())
	uid, at, ok, err := find(context.Background(), "team-a", "cnn")
	if err != nil || !ok || uid != "js-1" || !at.Equal(js.CreationTimestamp.Time) {
		t.Errorf("found %q %v %v %v", uid, at, ok, err)
	}
	uid, at, ok, err = find(context.Background(), "team-a", "timed-out")
	if err != nil || !ok || uid != "" || !at.Equal(timedOut.CreationTimestamp.Time) {
		t.Errorf("a timed-out job without its JobSet: found %q %v %v %v, want its TrainJob's creation and no JobSet UID", uid, at, ok, err)
	}
	if _, _, ok, err := find(context.Background(), "team-a", "gone"); ok || err != nil {
		t.Errorf("no job of the name: %v %v", ok, err)
	}
}

// The cache keeps no managedFields of anything, and of Kueue's Workloads
// only what the queue reads.
func TestCacheTransform(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}}}
	got, err := stripAndTrimWorkloads(pod)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.(*corev1.Pod).ManagedFields) != 0 {
		t.Error("managedFields kept in the cache")
	}
}
