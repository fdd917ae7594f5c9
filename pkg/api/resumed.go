package api

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ResumedAnnotation holds a Resumed as JSON: mpijob-manager writes it when
// the Launcher's log says that the program took up again from a
// checkpoint (a progress report with "resumed"), so that it is known after
// that line scrolled out of the lines read. Only mpijob-manager writes it,
// like StatusAnnotation.
const ResumedAnnotation = "mpijob.dev/resumed"

// Resumed is where a job's program took up again from a checkpoint.
type Resumed struct {
	// Epoch is the epochs done in the checkpoint, Step the steps done of
	// the next one; TotalEpochs the run's epochs (0: unknown).
	Epoch       float64 `json:"epoch"`
	Step        float64 `json:"step,omitempty"`
	TotalEpochs float64 `json:"totalEpochs,omitempty"`
	// AgeSeconds is how long before the resume the checkpoint was written.
	AgeSeconds float64 `json:"ageSeconds,omitempty"`
	// From is another job's checkpoint it started from (--resume-from);
	// "" for the job's own.
	From string `json:"from,omitempty"`
	// At is when the program said so.
	At metav1.Time `json:"at"`
}

// ReadResumed decodes a Resumed from a TrainJob's annotations (nil, nil
// when there is none).
func ReadResumed(annotations map[string]string) (*Resumed, error) {
	return readAnnotation[Resumed](annotations, ResumedAnnotation, "resume")
}

// Encode renders r for ResumedAnnotation.
func (r Resumed) Encode() (string, error) {
	b, err := json.Marshal(r)
	return string(b), err
}

// Text says where the job took up again, as every interface shows it:
// "resumed from epoch 12 of 30 (checkpoint written 4 minutes earlier)".
// The words are shared with the SDK and the dashboard
// (pkg/jobview/testdata/details.json).
func (r Resumed) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "resumed from epoch %s", num(r.Epoch))
	if r.TotalEpochs > 0 {
		fmt.Fprintf(&b, " of %s", num(r.TotalEpochs))
	}
	if r.Step > 0 {
		fmt.Fprintf(&b, ", step %s of the next", num(r.Step))
	}
	var notes []string
	if r.From != "" {
		notes = append(notes, "another job's checkpoint, "+r.From)
	}
	if r.AgeSeconds > 0 {
		notes = append(notes, "checkpoint written "+Ago(time.Duration(r.AgeSeconds)*time.Second)+" earlier")
	}
	if len(notes) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(notes, "; "))
	}
	return b.String()
}

func num(f float64) string {
	if f == math.Trunc(f) {
		return fmt.Sprintf("%d", int64(f))
	}
	return fmt.Sprintf("%g", f)
}

// Ago says a duration in whole units: "40 seconds", "4 minutes", "2 hours".
func Ago(d time.Duration) string {
	switch {
	case d < time.Minute:
		return Count(int(d/time.Second), "second", "seconds")
	case d < time.Hour:
		return Count(int(d/time.Minute), "minute", "minutes")
	case d < 48*time.Hour:
		return Count(int(d/time.Hour), "hour", "hours")
	}
	return Count(int(d/(24*time.Hour)), "day", "days")
}

// Attempts says how often a job started again: after a failure (JobSet's
// restarts, up to MaxRetries) and after Kueue preempted it.
type Attempts struct {
	Retries     int32 `json:"retries,omitempty"`
	MaxRetries  int32 `json:"maxRetries,omitempty"`
	Preemptions int32 `json:"preemptions,omitempty"`
}

// Text is "retry 2 of 3, preempted once" ("" for a first attempt).
func (a Attempts) Text() string {
	var parts []string
	if a.Retries > 0 {
		if a.MaxRetries > 0 {
			parts = append(parts, fmt.Sprintf("retry %d of %d", a.Retries, a.MaxRetries))
		} else {
			parts = append(parts, fmt.Sprintf("retry %d", a.Retries))
		}
	}
	switch {
	case a.Preemptions == 1:
		parts = append(parts, "preempted once")
	case a.Preemptions > 1:
		parts = append(parts, fmt.Sprintf("preempted %d times", a.Preemptions))
	}
	return strings.Join(parts, ", ")
}
