package pki

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"testing"
)

// A certificate the CA issues is signed by it, for the names and usages asked.
func TestIssue(t *testing.T) {
	p, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Issue(CertSpec{Name: "apiserver", CN: "kube-apiserver", DNS: []string{"kubernetes"}, IPs: []string{"127.0.0.1"}, Server: true}); err != nil {
		t.Fatal(err)
	}
	if err := p.ServiceAccountKey(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p.Path("apiserver", "crt"))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	caBlock, _ := pem.Decode(p.CAPEM)
	ca, err := x509.ParseCertificate(caBlock.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if err := cert.CheckSignatureFrom(ca); err != nil {
		t.Errorf("the certificate is not the CA's: %v", err)
	}
	if err := cert.VerifyHostname("kubernetes"); err != nil {
		t.Errorf("the certificate is not for kubernetes: %v", err)
	}
	if len(cert.ExtKeyUsage) != 1 || cert.ExtKeyUsage[0] != x509.ExtKeyUsageServerAuth {
		t.Errorf("usages %v, want server auth only", cert.ExtKeyUsage)
	}
	for _, f := range []string{p.Path("apiserver", "key"), p.Path("sa", "key"), p.Path("sa", "pub")} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}
