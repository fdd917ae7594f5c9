package dashboard

import (
	"mime"
	"net/http"
	"net/url"
	"strings"
)

// ContentSecurityPolicy allows the dashboard's own scripts only (the
// front end has no inline script), its own API, and nothing framing it.
// Styles may be inline: PatternFly sets style attributes.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
	"font-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// guard adds the security headers to every answer and refuses
// cross-site state changes before any handler runs:
//   - a request that changes state (not GET, HEAD or OPTIONS) and is not
//     sent with its own Authorization: Bearer token (which a page on
//     another site cannot attach) must come from this dashboard's own
//     origin, by its Origin header or, failing that, its Referer;
//   - a body must be application/json, so an HTML form or a text/plain
//     "simple request" can never carry one.
func guard(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("Referrer-Policy", "same-origin")
		w.Header().Set("Content-Security-Policy", ContentSecurityPolicy)
		if secureRequest(r) {
			w.Header().Set("Strict-Transport-Security", "max-age=31536000")
		}
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
		default:
			if msg := crossSite(r); msg != "" {
				writeError(w, http.StatusForbidden, msg)
				return
			}
			if msg := notJSON(r); msg != "" {
				writeError(w, http.StatusUnsupportedMediaType, msg)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// crossSite says why a state-changing request is refused as cross-site,
// or "" when it may go on.
func crossSite(r *http.Request) string {
	if strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
		return ""
	}
	from, header := r.Header.Get("Origin"), "Origin"
	if from == "" || from == "null" {
		from, header = r.Header.Get("Referer"), "Referer"
	}
	if from == "" {
		return "cross-site request refused: a request that changes something must carry this dashboard's Origin (browsers send it), or an Authorization: Bearer token"
	}
	u, err := url.Parse(from)
	if err != nil || u.Host == "" {
		return "cross-site request refused: its " + header + " header is not a URL"
	}
	for _, host := range hostsOf(r) {
		if strings.EqualFold(u.Host, host) {
			return ""
		}
	}
	return "cross-site request refused: it comes from " + u.Scheme + "://" + u.Host + ", not from this dashboard"
}

// hostsOf are the names this request reached the dashboard by: its Host,
// and the host a reverse proxy in front says it forwarded.
func hostsOf(r *http.Request) []string {
	hosts := []string{r.Host}
	if fh := r.Header.Get("X-Forwarded-Host"); fh != "" {
		hosts = append(hosts, strings.TrimSpace(strings.Split(fh, ",")[0]))
	}
	return hosts
}

// notJSON says why a request's body is refused, or "" when it has none or
// is JSON.
func notJSON(r *http.Request) string {
	if r.ContentLength == 0 {
		return ""
	}
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		if ct == "" {
			ct = "none"
		}
		return "the request's body must be JSON: send it with Content-Type: application/json (it came as " + ct + ")"
	}
	return ""
}

// secureRequest reports whether the browser reached the dashboard over
// TLS: directly, or through a proxy that says so.
func secureRequest(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}
