package api

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The vectors are shared with the Python SDK (get_events' forged flag).
func TestForgedEventVectors(t *testing.T) {
	b, err := os.ReadFile("testdata/event-proof.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		EventDigests []string `json:"eventDigests"`
		Vectors      []struct {
			Name, UID, Type, Reason, Message                       string
			ReportingComponent, SourceComponent, ReportingInstance string
			Forged                                                 bool
		} `json:"vectors"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	st := Status{EventDigests: doc.EventDigests}
	for _, v := range doc.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			e := corev1.Event{InvolvedObject: corev1.ObjectReference{UID: types.UID(v.UID)}, Type: v.Type, Reason: v.Reason, Message: v.Message, ReportingController: v.ReportingComponent,
				ReportingInstance: v.ReportingInstance, Source: corev1.EventSource{Component: v.SourceComponent}}
			if got := ForgedEvent(e, st); got != v.Forged {
				t.Errorf("ForgedEvent = %v, want %v", got, v.Forged)
			}
			if !v.Forged && ClaimsManager(e) && !ForgedEvent(e, Status{}) {
				t.Error("an Event no status vouches for passed as the manager's")
			}
		})
	}
}

func TestWithEventDigestKeepsTheLatest(t *testing.T) {
	var ds []string
	for i := range MaxEventDigests + 5 {
		ds = WithEventDigest(ds, fmt.Sprint(i))
	}
	if len(ds) != MaxEventDigests || ds[0] != "5" || ds[len(ds)-1] != fmt.Sprint(MaxEventDigests+4) {
		t.Errorf("digests %v: want the latest %d", ds, MaxEventDigests)
	}
}
