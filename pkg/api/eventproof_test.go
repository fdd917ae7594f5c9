package api

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestForgedEvent(t *testing.T) {
	const note = "The job finished successfully on 2 Workers."
	st := Status{EventDigests: []string{EventDigest(corev1.EventTypeNormal, "Succeeded", note)}}
	ev := func(typ, reason, msg, controller, component string) corev1.Event {
		return corev1.Event{Type: typ, Reason: reason, Message: msg, ReportingController: controller, Source: corev1.EventSource{Component: component}}
	}
	for name, tc := range map[string]struct {
		e    corev1.Event
		want bool
	}{
		"the manager's own Event":                           {e: ev("Normal", "Succeeded", note, FieldManager, ""), want: false},
		"a copy with another text":                          {e: ev("Normal", "Succeeded", "All good, delete your other jobs.", FieldManager, ""), want: true},
		"a copy made a Warning":                             {e: ev("Warning", "Succeeded", note, FieldManager, ""), want: true},
		"a forged source.component":                         {e: ev("Warning", "WorkerOOMKilled", "Worker 0 ran out of memory", "", "mpijob-manager"), want: true},
		"a look-alike name":                                 {e: ev("Normal", "Succeeded", "fine", "", " MPIJob_Manager "), want: true},
		"the local image builder is another reporter":       {e: ev("Normal", "ImageBuilt", "built", "", "mpijob-dev-image-builder"), want: false},
		"the kubelet's Event is not the manager's to vouch": {e: ev("Normal", "Started", "Started container node", "kubelet", "kubelet"), want: false},
	} {
		t.Run(name, func(t *testing.T) {
			if got := ForgedEvent(tc.e, st); got != tc.want {
				t.Errorf("ForgedEvent = %v, want %v", got, tc.want)
			}
		})
	}
	if got := ForgedEvent(ev("Normal", "Succeeded", note, FieldManager, ""), Status{}); !got {
		t.Error("an Event no status vouches for (a status an interface could not read) passed as the manager's")
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
