package api

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// MaxEventDigests is how many of a job's latest Events its status vouches
// for.
const MaxEventDigests = 32

// Anyone who may edit a namespace may create Events in it (the built-in
// admin and edit roles allow it), with any reason, text or source. So the
// manager vouches for the Events it writes about a job in the job's
// status, which only it may write (admission): Status.EventDigests holds
// EventDigest of each of its latest Events. An Event that claims to come
// from mpijob-manager and is not vouched for was written by someone else.

// EventDigest identifies an Event the manager wrote about a TrainJob by
// the job's UID, its type, reason and text. The UID binds it to the one
// job: an Event of another job, or of an earlier job of the same name,
// copied onto this one is not vouched for, however alike its text.
func EventDigest(uid, eventType, reason, note string) string {
	sum := sha256.Sum256([]byte(uid + "\x00" + eventType + "\x00" + reason + "\x00" + note))
	return hex.EncodeToString(sum[:8])
}

// WithEventDigest is digests with d added last, the oldest dropped past
// MaxEventDigests.
func WithEventDigest(digests []string, d string) []string {
	out := append(append([]string{}, digests...), d)
	if len(out) > MaxEventDigests {
		out = out[len(out)-MaxEventDigests:]
	}
	return out
}

// ClaimsManager reports whether e says it comes from mpijob-manager (in
// any case or spacing; the local cluster's image builder, another
// reporter, does not).
func ClaimsManager(e corev1.Event) bool {
	for _, who := range []string{e.ReportingController, e.Source.Component, e.ReportingInstance} {
		w := strings.Join(strings.FieldsFunc(strings.ToLower(who), func(r rune) bool {
			return r == ' ' || r == '-' || r == '_' || r == '.' || r == '/'
		}), "-")
		if strings.Contains(w, "mpijob-manager") {
			return true
		}
	}
	return false
}

// ForgedEvent reports whether e claims to come from mpijob-manager but is
// not one of the Events the manager vouches for in s (the status of the
// TrainJob e is about). Events about the job's other objects, from the
// kubelet or the engine's controllers, are not the manager's to vouch
// for.
func ForgedEvent(e corev1.Event, s Status) bool {
	if !ClaimsManager(e) {
		return false
	}
	d := EventDigest(string(e.InvolvedObject.UID), e.Type, e.Reason, e.Message)
	for _, v := range s.EventDigests {
		if v == d {
			return false
		}
	}
	return true
}
