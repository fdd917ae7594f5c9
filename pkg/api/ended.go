package api

import (
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Ended is why mpijob-manager ended a job that could never finish, as
// EndedByAnnotation holds it (JSON): the diagnosis at that moment, and the
// grace period it had waited.
type Ended struct {
	// Reason is the diagnosis's reason when it was ended:
	// RankFailedOthersWaiting, ImagePullFailed or CannotStart.
	Reason string `json:"reason"`
	// Message is the diagnosis's message at that moment.
	Message string `json:"message,omitempty"`
	// After is the grace period it had waited (policy.mpijob.dev/end-stuck-after), as 10m0s.
	After string `json:"after"`
	// Subject is the pod the diagnosis named, if any.
	Subject *PodRef `json:"subject,omitempty"`
	// At is when it was ended.
	At metav1.Time `json:"at"`
}

// Encode is the annotation's value.
func (e Ended) Encode() (string, error) {
	b, err := json.Marshal(e)
	return string(b), err
}

// ReadEnded decodes EndedByAnnotation (nil, nil when there is none).
func ReadEnded(annotations map[string]string) (*Ended, error) {
	raw, ok := annotations[EndedByAnnotation]
	if !ok || raw == "" {
		return nil, nil
	}
	var e Ended
	if err := json.Unmarshal([]byte(raw), &e); err != nil {
		return nil, fmt.Errorf("annotation %s is not an ended record: %w", EndedByAnnotation, err)
	}
	if e.Reason == "" {
		return nil, fmt.Errorf("annotation %s names no reason", EndedByAnnotation)
	}
	return &e, nil
}
