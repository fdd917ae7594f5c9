package api

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// StacksAnnotation holds a StackSnapshot as JSON: when the diagnosis names
// a silent rank (RankSilent) or a job with no output (NoProgress),
// mpijob-manager takes every rank's stack once (pkg/stacks) and keeps what
// it found here; the diagnosis's message then says where the ranks wait.
// Only mpijob-manager writes it, like StatusAnnotation.
const StacksAnnotation = "mpijob.dev/stacks"

// StackSnapshot is where a job's ranks were when the manager looked.
type StackSnapshot struct {
	// At is when the stacks were taken; Reason the finding they were
	// taken for.
	At     metav1.Time `json:"at"`
	Reason string      `json:"reason"`
	// Contrast is the groups in a sentence ("rank 7 waits in comm.recv
	// while ranks 0-6 wait in comm.Allreduce"); "" when all ranks are in
	// one place.
	Contrast string `json:"contrast,omitempty"`
	// Groups are the groups' headlines, the largest first.
	Groups []string `json:"groups,omitempty"`
	// Error is why no stacks could be taken ("" when they were).
	Error string `json:"error,omitempty"`
}

// MaxStackGroups bounds the headlines a snapshot keeps.
const MaxStackGroups = 8

// ReadStackSnapshot decodes a StackSnapshot from a TrainJob's annotations
// (nil, nil when there is none).
func ReadStackSnapshot(annotations map[string]string) (*StackSnapshot, error) {
	return readAnnotation[StackSnapshot](annotations, StacksAnnotation, "stack snapshot")
}

// Encode renders s for StacksAnnotation.
func (s StackSnapshot) Encode() (string, error) {
	b, err := json.Marshal(s)
	return string(b), err
}
