package artifacts

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A tenant's endpoint on the server's loopback is refused before any
// byte is sent, with the same words whether a port there is open or
// closed; an endpoint elsewhere is reached.
func TestNoLocalTransport(t *testing.T) {
	open := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNotFound) }))
	defer open.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedURL := "http://" + closed.Addr().String()
	_ = closed.Close()
	var said []string
	for _, ep := range []string{open.URL, closedURL, "http://localhost:1", "http://169.254.169.254", "http://[::1]:9"} {
		s, err := New("conn", map[string][]byte{"AWS_S3_ENDPOINT": []byte(ep), "AWS_S3_BUCKET": []byte("bucket"),
			"AWS_ACCESS_KEY_ID": []byte("k"), "AWS_SECRET_ACCESS_KEY": []byte("s")}, "job", WithTransport(NoLocalTransport()))
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.List(context.Background())
		if err == nil || !strings.Contains(err.Error(), "a loopback, link-local or unspecified address") || !strings.Contains(err.Error(), "fix AWS_S3_ENDPOINT") {
			t.Errorf("%s: %v, want refused as a local address", ep, err)
			continue
		}
		said = append(said, strings.ReplaceAll(err.Error(), ep, "EP"))
	}
	// The open and the closed loopback port read alike.
	if len(said) >= 2 && said[0] != said[1] {
		t.Errorf("an open and a closed port read differently:\n%s\n%s", said[0], said[1])
	}
	for _, ip := range []string{"10.244.0.1", "192.0.2.2", "52.216.0.1"} {
		if LocalAddress(net.ParseIP(ip)) {
			t.Errorf("%s refused: a cluster's or a cloud's store must stay reachable", ip)
		}
	}
}
