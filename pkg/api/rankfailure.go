package api

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RankFailureAnnotation holds a RankFailure as JSON: mpijob-manager reads it
// from a running job's Launcher log (a rank raised or timed out in a
// collective, yet the job keeps running) and the diagnosis names it. Only
// mpijob-manager writes it, like StatusAnnotation.
const RankFailureAnnotation = "mpijob.dev/rank-failure"

// RankFailure is the first rank of a running job that failed while the
// others live: most often a Python exception in one rank, which mpi4py
// finalizes cleanly, so mpirun never stops the others waiting for it in a
// collective.
type RankFailure struct {
	// Rank is the rank that failed; nil when the runtime does not tag the
	// ranks' output.
	Rank *int `json:"rank,omitempty"`
	// Error is the error's own line (e.g. "RuntimeError: boom").
	Error string `json:"error"`
	// Lines are the error's last lines, as the rank printed them.
	Lines []string `json:"lines,omitempty"`
	// At is when the rank printed the error (for a silent rank: its last
	// line).
	At metav1.Time `json:"at"`
	// Silent is a rank that stopped printing while the others print on
	// (the runtime's progress check): Error is then its last line.
	Silent bool `json:"silent,omitempty"`
}

// ReadRankFailure decodes a RankFailure from a TrainJob's annotations.
func ReadRankFailure(annotations map[string]string) (*RankFailure, error) {
	return readAnnotation[RankFailure](annotations, RankFailureAnnotation, "rank failure")
}

// Encode renders f for RankFailureAnnotation.
func (f RankFailure) Encode() (string, error) {
	b, err := json.Marshal(f)
	return string(b), err
}
