package main

import (
	"strings"
	"testing"
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
