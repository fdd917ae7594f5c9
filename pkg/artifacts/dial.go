package artifacts

import (
	"fmt"
	"net"
	"net/http"
	"syscall"
	"time"
)

// LocalAddressError is a connection NoLocalTransport refused.
type LocalAddressError struct{ Addr string }

func (e *LocalAddressError) Error() string {
	return fmt.Sprintf("the endpoint resolves to %s, a loopback, link-local or unspecified address, which a server never connects to for a tenant", e.Addr)
}

// NoLocalTransport is the transport of a server that reads a tenant's
// object store (the dashboard): a connection's endpoint is the tenant's to
// write, so the server refuses to connect to its own loopback, to
// link-local addresses (cloud metadata services, 169.254.169.254) and to
// unspecified or multicast ones, checked on the address it is about to
// connect to (after DNS, so a name that resolves there is refused too).
// Every refusal reads the same, so the server's own ports cannot be told
// open from closed through it.
func NoLocalTransport() http.RoundTripper {
	d := &net.Dialer{
		Timeout: 10 * time.Second,
		Control: func(_, address string, _ syscall.RawConn) error {
			host, _, err := net.SplitHostPort(address)
			if err != nil {
				return err
			}
			if ip := net.ParseIP(host); ip == nil || LocalAddress(ip) {
				return &LocalAddressError{Addr: host}
			}
			return nil
		},
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.DialContext = d.DialContext
	return t
}

// LocalAddress reports whether ip is one NoLocalTransport refuses.
func LocalAddress(ip net.IP) bool {
	return ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsUnspecified() || ip.IsMulticast() || ip.IsInterfaceLocalMulticast()
}
