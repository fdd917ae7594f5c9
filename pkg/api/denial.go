package api

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// QuotaCauseType marks a cause of mpijob's quota denial in the Status the
// API server returns (Details.Causes): its Field is the quota line
// (requests.nvidia.com/gpu) and its Message a QuotaCause in JSON. Clients
// (the CLI, the SDK, the dashboard) read the numbers from there, not from
// the sentence.
const QuotaCauseType metav1.CauseType = "mpijob.dev/QuotaExceeded"

// QuotaCause is one resource over quota: what the job asks in all, the
// quota, what is in use, and the most Workers that would fit (-1: not even
// the Launcher).
type QuotaCause struct {
	// Resource is the name people know (nvidia.com/gpu, memory, pods).
	Resource      string `json:"resource"`
	Requested     string `json:"requested"`
	Quota         string `json:"quota"`
	InUse         string `json:"inUse"`
	ResourceQuota string `json:"resourceQuota"`
	MaxWorkers    int64  `json:"maxWorkers"`
}

// Cause is q as a StatusCause of a denial.
func (q QuotaCause) Cause(key string) metav1.StatusCause {
	raw, err := json.Marshal(q)
	if err != nil { // strings and an int: cannot fail
		panic(err)
	}
	return metav1.StatusCause{Type: QuotaCauseType, Field: key, Message: string(raw)}
}

// QuotaCauses reads the quota causes of a Status (none when it is not a
// quota denial of mpijob's).
func QuotaCauses(st metav1.Status) []QuotaCause {
	if st.Details == nil {
		return nil
	}
	var out []QuotaCause
	for _, c := range st.Details.Causes {
		if c.Type != QuotaCauseType {
			continue
		}
		var q QuotaCause
		if json.Unmarshal([]byte(c.Message), &q) == nil {
			out = append(out, q)
		}
	}
	return out
}
