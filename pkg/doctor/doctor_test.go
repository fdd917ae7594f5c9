package doctor

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestEnginePair(t *testing.T) {
	cases := map[string]struct{ trainer, kueue, want string }{
		"Trainer v2.3 with Kueue v0.19: built for another API": {"v2.3.0", "v0.19.2", SeverityWarning},
		"Trainer v2.3 with Kueue v0.20":                        {"v2.3.0", "v0.20.1", SeverityOK},
		"Trainer v2.2 with Kueue v0.19":                        {"v2.2.0", "v0.19.2", SeverityOK},
		"a version unknown":                                    {"", "v0.19.2", SeverityInfo},
		"not a version":                                        {"main", "v0.19.2", SeverityInfo},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := EnginePair(tc.trainer, tc.kueue)
			if f.Severity != tc.want {
				t.Errorf("%s %s: %s (%s), want %s", tc.trainer, tc.kueue, f.Severity, f.Message, tc.want)
			}
			if f.Severity == SeverityWarning && f.Fix == "" {
				t.Errorf("a warning without a fix: %+v", f)
			}
		})
	}
}

func TestLeaderFinding(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	lease := func(holder string, renewed time.Duration) *coordinationv1.Lease {
		l := &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr.To[int32](15),
			AcquireTime: &metav1.MicroTime{Time: now.Add(-time.Hour)}}}
		if holder != "" {
			l.Spec.HolderIdentity = ptr.To(holder)
			l.Spec.RenewTime = &metav1.MicroTime{Time: now.Add(-renewed)}
		}
		return l
	}
	cases := map[string]struct {
		l    *coordinationv1.Lease
		want Finding
	}{
		"a leader that renews": {lease("mpijob-manager-abc_1234", 2*time.Second),
			Finding{Check: "manager", Severity: SeverityOK, Message: "leader mpijob-manager-abc for 60m, renewed 2s ago"}},
		"a leader that stopped renewing": {lease("mpijob-manager-abc_1234", time.Minute),
			Finding{Check: "manager", Severity: SeverityError, Message: "the leader mpijob-manager-abc last renewed its lease 1m0s ago (it lasts 15s): no replica leads now",
				Fix: "kubectl -n mpijob-system get pods; a replica that cannot reach the API server cannot lead"}},
		"no holder": {lease("", 0), Finding{Check: "manager", Severity: SeverityError,
			Message: "no mpijob-manager replica leads: diagnosis, progress and NetworkPolicies stop",
			Fix:     "kubectl -n mpijob-system get pods; read the manager's log (kubectl -n mpijob-system logs deploy/mpijob-manager)"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, LeaderFinding(tc.l, now)); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestImageFindings(t *testing.T) {
	node := corev1.Node{Status: corev1.NodeStatus{Images: []corev1.ContainerImage{
		{Names: []string{"ghcr.io/mpijob/openmpi@sha256:abc", "ghcr.io/mpijob/openmpi:4.1"}},
		{Names: []string{"docker.io/library/busybox:1.36"}},
	}}}
	want := map[string][]string{"ghcr.io/mpijob/openmpi:4.1": {"mpi-openmpi"}, "busybox:1.36": {"mpi-openmpi"},
		"ghcr.io/mpijob/openmpi-cuda:4.1": {"mpi-openmpi-gpu", "mpi-deepspeed-gpu"}}
	got := ImageFindings(want, []corev1.Node{node})
	if len(got) != 1 || got[0].Severity != SeverityWarning ||
		got[0].Message != "image ghcr.io/mpijob/openmpi-cuda:4.1 of runtime mpi-openmpi-gpu, mpi-deepspeed-gpu is on no node: the first job pulls it (slowly), or fails with ImagePullFailed if the registry cannot be reached" {
		t.Errorf("findings %+v", got)
	}
	delete(want, "ghcr.io/mpijob/openmpi-cuda:4.1")
	if got := ImageFindings(want, []corev1.Node{node}); len(got) != 1 || got[0].Severity != SeverityOK {
		t.Errorf("every image on a node: %+v", got)
	}
}

func TestCertFindings(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	cert := func(notAfter time.Time) []byte {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mpijob-ca"}, NotBefore: now.Add(-time.Hour), NotAfter: notAfter}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	}
	got := CertFindings(map[string][]byte{
		"a": cert(now.AddDate(1, 0, 0)), "b": cert(now.AddDate(0, 0, 10)), "c": cert(now.Add(-time.Hour)), "d": nil,
	}, now)
	var sev []string
	for _, f := range got {
		sev = append(sev, f.Severity)
	}
	if d := cmp.Diff([]string{SeverityOK, SeverityWarning, SeverityError, SeverityError}, sev); d != "" {
		t.Errorf("severities (-want +got):\n%s\n%+v", d, got)
	}
	if got[1].Message != `b: certificate "mpijob-ca" expires in 10d (2026-12-08)` {
		t.Errorf("the warning says %q", got[1].Message)
	}
}
