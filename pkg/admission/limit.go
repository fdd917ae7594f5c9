package admission

import (
	"fmt"
	"net/http"

	"golang.org/x/sync/semaphore"
)

// MaxRequestBytes is the largest AdmissionReview the webhooks read, as
// controller-runtime caps it: two objects of at most 3 MB and the rest.
const MaxRequestBytes = 7 << 20

// DefaultInFlightBytes bounds the bytes of AdmissionReviews the webhooks
// handle at once. Decoding one costs about twice its size, so a replica
// of 512 Mi holds its budget with room to spare; the API server's own
// reviews of MPI jobs are a few kB each and never wait for it.
const DefaultInFlightBytes = 48 << 20

// Bounded limits what a webhook handler holds in memory at once: each
// request reserves its declared size (MaxRequestBytes when it declares
// none) from a budget of inFlight bytes before its body is read, and
// waits for the budget while its caller does (the API server gives up
// after the webhook's timeoutSeconds). A request larger than
// MaxRequestBytes is refused before anything is read. Many large requests
// from anyone who can reach the port can then no longer take the replica
// down with them.
func Bounded(h http.Handler, inFlight int64) http.Handler {
	sem := semaphore.NewWeighted(inFlight)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		weight := r.ContentLength
		switch {
		case weight > MaxRequestBytes:
			http.Error(w, fmt.Sprintf("request entity is too large: %d bytes, the limit is %d", weight, MaxRequestBytes), http.StatusRequestEntityTooLarge)
			return
		case weight < 0:
			weight = MaxRequestBytes
		case weight < 4<<10:
			weight = 4 << 10
		}
		if weight > inFlight {
			weight = inFlight
		}
		if err := sem.Acquire(r.Context(), weight); err != nil {
			http.Error(w, "too many admission requests in flight: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		defer sem.Release(weight)
		r.Body = http.MaxBytesReader(w, r.Body, MaxRequestBytes)
		h.ServeHTTP(w, r)
	})
}
