// Package progress is a training job's progress: the line a rank prints
// (`MPIJOB_PROGRESS {"epoch": 3, "total_epochs": 20, "loss": 0.31, ...}`,
// docs/progress.md), and what mpijob-manager makes of the last one: the
// TrainJob annotation trainer.opendatahub.io/trainerStatus, in the format
// OpenShift AI's training views read. Pure; the controller reads the
// Launcher's log and writes the annotation.
//
// The line format is shared with the Python SDK (mpijob.progress) and the
// examples' helper; testdata/vectors.json holds the cases all three test.
package progress

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// Prefix starts every progress line.
const Prefix = "MPIJOB_PROGRESS "

// Annotation is where the manager publishes a job's last progress, in
// OpenShift AI's format (TrainerStatus): its dashboard's training job views
// read this annotation, not Trainer's status.trainerStatus.
const Annotation = "trainer.opendatahub.io/trainerStatus"

// Report is one progress line: where training is, and how it goes. Every
// field is optional; a report needs an epoch or a step.
type Report struct {
	Epoch       *float64 `json:"epoch,omitempty"`
	TotalEpochs *float64 `json:"total_epochs,omitempty"`
	Step        *float64 `json:"step,omitempty"`
	TotalSteps  *float64 `json:"total_steps,omitempty"`
	Loss        *float64 `json:"loss,omitempty"`
	Accuracy    *float64 `json:"accuracy,omitempty"`
	ETASeconds  *float64 `json:"eta_seconds,omitempty"`
	// Metrics are other numbers the program reports (learning rate, ...).
	Metrics map[string]float64 `json:"metrics,omitempty"`
	// Resumed says that the program took up again from a checkpoint
	// (mpijob.checkpoint's resumed_report), in the report it prints first.
	Resumed *Resumed `json:"resumed,omitempty"`
	// RankStepSeconds is each rank's mean time computing one step since
	// the last report (not the wait for the others in a collective),
	// indexed by rank: rank 0 gathers them (the examples' StepTimes). The
	// step times of kubectl mpijob top and the slow-rank warning.
	RankStepSeconds []float64 `json:"rank_step_seconds,omitempty"`
}

// Resumed is where a program took up again: after Epoch epochs and Step
// steps of the next, from a checkpoint written AgeSeconds before; From is
// another job's checkpoint (--resume-from), "" for the job's own.
type Resumed struct {
	Epoch      float64 `json:"epoch"`
	Step       float64 `json:"step,omitempty"`
	AgeSeconds float64 `json:"age_seconds,omitempty"`
	From       string  `json:"from,omitempty"`
}

// MaxFromLength is the longest checkpoint URI a report keeps.
const MaxFromLength = 512

// Bounds of a progress report (shared with the SDK and the examples,
// pkg/progress/testdata/vectors.json).
const (
	// MaxCount is the largest epoch or step (and their totals) kept.
	MaxCount = 1e12
	// MaxMetrics is how many metrics a report keeps (by name, in order);
	// the annotation that publishes them stays small.
	MaxMetrics = 32
	// MaxMetricNameLength is the longest metric name kept.
	MaxMetricNameLength = 64
	// MaxRanks is the most ranks a report's rank_step_seconds holds, and
	// MaxStepSeconds the longest step time in it; a list past either, or
	// with a value that is not a number in range, is left out whole.
	MaxRanks       = 65536
	MaxStepSeconds = 1e6
)

// MetricName reports whether name may be a metric's name: letters,
// digits and _ . : / - only, at most MaxMetricNameLength, so no escape
// code, control or direction character reaches a terminal or a page.
func MetricName(name string) bool {
	if name == "" || len(name) > MaxMetricNameLength {
		return false
	}
	for _, c := range name {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', strings.ContainsRune("_.:/-", c):
		default:
			return false
		}
	}
	return true
}

// keptMetrics are the metrics a report keeps: names that MetricName
// allows, finite values, at most MaxMetrics of them by name; nil when
// none is left.
func keptMetrics(m map[string]float64) map[string]float64 {
	names := make([]string, 0, len(m))
	for k, v := range m {
		if MetricName(k) && !math.IsNaN(v) && !math.IsInf(v, 0) {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	var out map[string]float64
	for _, k := range names[:min(len(names), MaxMetrics)] {
		if out == nil {
			out = map[string]float64{}
		}
		out[k] = m[k]
	}
	return out
}

// Parse reads one log line. A line that is not a progress report, or one
// that does not decode, is not one (ok false): a program's output never
// breaks the job's view.
func Parse(line string) (Report, bool) {
	line = strings.TrimRight(line, "\r\n")
	i := strings.Index(line, Prefix)
	if i < 0 {
		return Report{}, false
	}
	var raw map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(line[i+len(Prefix):])), &raw); err != nil {
		return Report{}, false
	}
	var r Report
	// A program prints what it likes: numbers out of range are left out
	// (a count past MaxCount, a negative one, an ETA that no int32 holds),
	// not wrapped into nonsense where they are shown.
	num := func(k string, lo, hi float64) *float64 {
		v, ok := raw[k].(float64)
		if !ok || math.IsNaN(v) || math.IsInf(v, 0) || v < lo || v > hi {
			return nil
		}
		return &v
	}
	r.Epoch, r.TotalEpochs = num("epoch", 0, MaxCount), num("total_epochs", 0, MaxCount)
	r.Step, r.TotalSteps = num("step", 0, MaxCount), num("total_steps", 0, MaxCount)
	r.Loss, r.Accuracy = num("loss", -math.MaxFloat64, math.MaxFloat64), num("accuracy", -math.MaxFloat64, math.MaxFloat64)
	r.ETASeconds = num("eta_seconds", 0, math.MaxInt32)
	if m, ok := raw["metrics"].(map[string]any); ok {
		values := map[string]float64{}
		for k, v := range m {
			if f, ok := v.(float64); ok {
				values[k] = f
			}
		}
		r.Metrics = keptMetrics(values)
	}
	if m, ok := raw["resumed"].(map[string]any); ok {
		r.Resumed = resumedOf(m)
	}
	r.RankStepSeconds = stepSeconds(raw["rank_step_seconds"])
	if r.Epoch == nil && r.Step == nil {
		return Report{}, false
	}
	return r, true
}

// stepSeconds reads rank_step_seconds: a list of at most MaxRanks
// numbers in [0, MaxStepSeconds]; anything else leaves it out whole (a
// rank's place in the list is its number).
func stepSeconds(v any) []float64 {
	l, ok := v.([]any)
	if !ok || len(l) == 0 || len(l) > MaxRanks {
		return nil
	}
	out := make([]float64, len(l))
	for i, x := range l {
		f, ok := x.(float64)
		if !ok || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 || f > MaxStepSeconds {
			return nil
		}
		out[i] = f
	}
	return out
}

// resumedOf reads a report's resumed part: an epoch is needed, numbers out
// of range are left out, and a From that is not a plain URI is dropped.
func resumedOf(m map[string]any) *Resumed {
	num := func(k string, hi float64) (float64, bool) {
		v, ok := m[k].(float64)
		return v, ok && !math.IsNaN(v) && !math.IsInf(v, 0) && v >= 0 && v <= hi
	}
	e, ok := num("epoch", MaxCount)
	if !ok {
		return nil
	}
	r := &Resumed{Epoch: e}
	if v, ok := num("step", MaxCount); ok {
		r.Step = v
	}
	if v, ok := num("age_seconds", math.MaxInt32); ok {
		r.AgeSeconds = v
	}
	if f, ok := m["from"].(string); ok && len(f) <= MaxFromLength && plainURI(f) {
		r.From = f
	}
	return r
}

// plainURI reports whether s has only printable ASCII without spaces: no
// escape, control or direction character reaches a terminal or a page.
func plainURI(s string) bool {
	for _, c := range s {
		if c <= ' ' || c > '~' {
			return false
		}
	}
	return true
}

// Point is a report with the time its line was logged (zero when the log
// had no timestamps).
type Point struct {
	Time time.Time `json:"time,omitempty"`
	Report
}

// All reads every report of a log, in order. Lines may start with the
// kubelet's RFC 3339 timestamp (PodLogOptions.Timestamps).
func All(log string) []Point {
	var out []Point
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, Prefix) {
			continue
		}
		var t time.Time
		if ts, rest, ok := strings.Cut(line, " "); ok {
			if parsed, err := time.Parse(time.RFC3339Nano, ts); err == nil {
				t, line = parsed, rest
			}
		}
		if r, ok := Parse(line); ok {
			out = append(out, Point{Time: t, Report: r})
		}
	}
	return out
}

// Last is the last report of a log.
func Last(log string) (Point, bool) {
	all := All(log)
	if len(all) == 0 {
		return Point{}, false
	}
	return all[len(all)-1], true
}

// Percent is how far a report is: by steps when it has them, else by
// epochs; nil when it has no total.
func (r Report) Percent() *int32 {
	var done, total *float64
	switch {
	case r.Step != nil && r.TotalSteps != nil && *r.TotalSteps > 0:
		done, total = r.Step, r.TotalSteps
	case r.Epoch != nil && r.TotalEpochs != nil && *r.TotalEpochs > 0:
		done, total = r.Epoch, r.TotalEpochs
	default:
		return nil
	}
	p := int32(math.Floor(100 * *done / *total))
	p = max(0, min(100, p))
	return &p
}

// TrainerStatus is OpenShift AI's progress of a training job, as its
// controller writes it in the trainer.opendatahub.io/trainerStatus
// annotation and its dashboard reads it.
type TrainerStatus struct {
	ProgressPercentage            *int32             `json:"progressPercentage"`
	EstimatedRemainingSeconds     *int32             `json:"estimatedRemainingSeconds,omitempty"`
	EstimatedRemainingTimeSummary string             `json:"estimatedRemainingTimeSummary,omitempty"`
	CurrentStep                   *int64             `json:"currentStep,omitempty"`
	TotalSteps                    *int64             `json:"totalSteps,omitempty"`
	CurrentEpoch                  *float64           `json:"currentEpoch,omitempty"`
	TotalEpochs                   *int64             `json:"totalEpochs,omitempty"`
	TrainMetrics                  map[string]float64 `json:"trainMetrics,omitempty"`
	LastUpdatedTime               string             `json:"lastUpdatedTime,omitempty"`
}

// Status turns the last report into the annotation's value at time now;
// finished says the job completed (100 %, nothing remaining).
func Status(p Point, now time.Time, finished bool) TrainerStatus {
	r := p.Report
	s := TrainerStatus{ProgressPercentage: r.Percent(), LastUpdatedTime: now.UTC().Format(time.RFC3339)}
	if r.ETASeconds != nil {
		eta := int32(math.Round(max(0, *r.ETASeconds)))
		s.EstimatedRemainingSeconds = &eta
		s.EstimatedRemainingTimeSummary = Summary(time.Duration(eta) * time.Second)
	}
	toInt := func(f *float64) *int64 {
		if f == nil {
			return nil
		}
		v := int64(math.Round(*f))
		return &v
	}
	s.CurrentStep, s.TotalSteps = toInt(r.Step), toInt(r.TotalSteps)
	s.CurrentEpoch, s.TotalEpochs = r.Epoch, toInt(r.TotalEpochs)
	m := map[string]float64{}
	for k, v := range r.Metrics {
		m[k] = v
	}
	if r.Loss != nil {
		m["loss"] = *r.Loss
	}
	if r.Accuracy != nil {
		m["accuracy"] = *r.Accuracy
	}
	if len(m) > 0 {
		s.TrainMetrics = m
	}
	if finished {
		hundred, zero := int32(100), int32(0)
		s.ProgressPercentage, s.EstimatedRemainingSeconds, s.EstimatedRemainingTimeSummary = &hundred, &zero, "complete"
	}
	return s
}

// Summary says a remaining time as OpenShift AI does: "1 hour 1 minute",
// "5 minutes", "40 seconds".
func Summary(d time.Duration) string {
	if d <= 0 {
		return "complete"
	}
	h, m, s := int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60
	unit := func(n int, name string) string {
		if n == 1 {
			return "1 " + name
		}
		return fmt.Sprintf("%d %ss", n, name)
	}
	switch {
	case h > 0 && m > 0:
		return unit(h, "hour") + " " + unit(m, "minute")
	case h > 0:
		return unit(h, "hour")
	case m > 0:
		return unit(m, "minute")
	}
	return unit(s, "second")
}

// Read decodes the annotation's value; ok is false when there is none or
// it does not decode.
func Read(annotations map[string]string) (TrainerStatus, bool) {
	v, ok := annotations[Annotation]
	if !ok || v == "" {
		return TrainerStatus{}, false
	}
	var s TrainerStatus
	if err := json.Unmarshal([]byte(v), &s); err != nil {
		return TrainerStatus{}, false
	}
	return s, true
}

// Short is the progress as the PROGRESS column shows it: "45% epoch 9/20",
// "24% step 120/500", "epoch 3", or "" when there is none.
func (s TrainerStatus) Short() string {
	var parts []string
	if s.ProgressPercentage != nil {
		parts = append(parts, fmt.Sprintf("%d%%", *s.ProgressPercentage))
	}
	switch {
	case s.CurrentStep != nil && s.TotalSteps != nil:
		parts = append(parts, fmt.Sprintf("step %d/%d", *s.CurrentStep, *s.TotalSteps))
	case s.CurrentEpoch != nil && s.TotalEpochs != nil:
		parts = append(parts, fmt.Sprintf("epoch %s/%d", trim(*s.CurrentEpoch), *s.TotalEpochs))
	case s.CurrentEpoch != nil:
		parts = append(parts, "epoch "+trim(*s.CurrentEpoch))
	case s.CurrentStep != nil:
		parts = append(parts, fmt.Sprintf("step %d", *s.CurrentStep))
	}
	return strings.Join(parts, " ")
}

// Metrics lists the metrics by name, loss and accuracy first.
func (s TrainerStatus) Metrics() []string {
	var names []string
	for k := range s.TrainMetrics {
		names = append(names, k)
	}
	rank := func(k string) int {
		switch k {
		case "loss":
			return 0
		case "accuracy":
			return 1
		}
		return 2
	}
	sort.Slice(names, func(i, j int) bool {
		if rank(names[i]) != rank(names[j]) {
			return rank(names[i]) < rank(names[j])
		}
		return names[i] < names[j]
	})
	return names
}

func trim(f float64) string {
	if f == math.Trunc(f) {
		return fmt.Sprintf("%d", int64(f))
	}
	return fmt.Sprintf("%.2f", f)
}

// Steps is a report's step times in brief: how many ranks reported, the
// median rank's seconds, and the slowest rank with its seconds.
type Steps struct {
	Ranks          int     `json:"ranks"`
	Median         float64 `json:"median"`
	Slowest        int     `json:"slowest"`
	SlowestSeconds float64 `json:"slowestSeconds"`
	// Others is the median of the other ranks than the slowest (what the
	// slow-rank warning compares it with); 0 for one rank.
	Others float64 `json:"others"`
}

// StepsOf summarizes r's rank_step_seconds (ok false when it has none).
func StepsOf(r Report) (Steps, bool) {
	v := r.RankStepSeconds
	if len(v) == 0 {
		return Steps{}, false
	}
	s := Steps{Ranks: len(v), Median: Median(v)}
	for i, x := range v {
		if x > s.SlowestSeconds {
			s.Slowest, s.SlowestSeconds = i, x
		}
	}
	if len(v) > 1 {
		s.Others = Median(append(append([]float64(nil), v[:s.Slowest]...), v[s.Slowest+1:]...))
	}
	return s, true
}

// Median is v's median (0 for none); v is left as it is.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// StepSeconds writes a step time as top and the slow-rank warning say it:
// "0.35 ms", "12 ms", "0.62 s".
func StepSeconds(s float64) string {
	if s < 0.01 {
		return fmt.Sprintf("%.2f ms", s*1000)
	}
	if s < 0.1 {
		return fmt.Sprintf("%.0f ms", s*1000)
	}
	return fmt.Sprintf("%.2f s", s)
}

// LastSteps is the last report of points that has step times.
func LastSteps(points []Point) (Point, Steps, bool) {
	for i := len(points) - 1; i >= 0; i-- {
		if s, ok := StepsOf(points[i].Report); ok {
			return points[i], s, true
		}
	}
	return Point{}, Steps{}, false
}
