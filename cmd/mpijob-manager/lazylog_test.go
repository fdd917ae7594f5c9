package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap/zapcore"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// encoded counts how often the logger encodes it.
type encoded struct {
	name string
	n    *int
}

func (e encoded) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	*e.n++
	return enc.AddReflected("name", e.name)
}

// TestLoggerValuesAreEncodedOnlyWhenWritten: a value added to the
// manager's logger (as controller-runtime adds the object's name to every
// round's) is encoded only when an entry is written, once for the
// logger's entries (as zap does), and the entry says what it would have
// said: every value, in order.
// Without lazyValues, zap encodes it at WithValues.
func TestLoggerValuesAreEncodedOnlyWhenWritten(t *testing.T) {
	var out bytes.Buffer
	var n int
	log := newLogger(&zap.Options{DestWriter: &out})
	round := log.WithName("diagnosis").WithValues("TrainJob", encoded{"team-a/job", &n}, "reconcileID", "42")
	round = round.WithValues("step", 1)
	if n != 0 {
		t.Fatalf("the value was encoded %d times before anything was logged, want 0", n)
	}
	round.V(1).Info("a detail the level leaves out")
	if n != 0 || out.Len() != 0 {
		t.Fatalf("an entry the level leaves out encoded the value %d times and wrote %q", n, out.String())
	}
	round.Info("written", "extra", true)
	round.Info("again")
	if n != 1 {
		t.Errorf("two entries encoded the value %d times, want once", n)
	}
	lines := bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n"))
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2: %s", len(lines), out.String())
	}
	var got map[string]any
	if err := json.Unmarshal(lines[0], &got); err != nil {
		t.Fatal(err)
	}
	delete(got, "ts")
	want := map[string]any{
		"level": "info", "logger": "diagnosis", "msg": "written",
		"TrainJob": map[string]any{"name": "team-a/job"}, "reconcileID": "42", "step": float64(1), "extra": true,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("the entry (-want +got):\n%s", d)
	}
	// A logger made from the first one holds its own values.
	other := log.WithValues("TrainJob", encoded{"team-b/other", &n})
	out.Reset()
	other.Info("other")
	round.Info("round")
	if bytes.Contains(bytes.Split(out.Bytes(), []byte("\n"))[0], []byte("reconcileID")) {
		t.Errorf("a sibling logger took the first one's values: %s", out.String())
	}
}
