package main

import (
	"slices"
	"sync"

	"github.com/go-logr/logr"
	uzap "go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// newLogger is the manager's logger: controller-runtime's zap logger with
// its flags, whose values (WithValues) are encoded only when it writes.
//
// controller-runtime gives every round of every controller a logger with
// the object's kind, namespace, name and the round's ID, and zap encodes
// such values into JSON at once, whether or not anything is then logged;
// in a round that logs nothing (nearly all of them) that is work thrown
// away: 3.3 % of the leader's allocations and 1.8 % of its CPU at 200
// jobs × 8 Workers (docs/development.md, "Measured 2026-12-03, 10:20").
// TestLoggerValuesAreEncodedOnlyWhenWritten.
func newLogger(o *zap.Options) logr.Logger {
	return zap.New(zap.UseFlagOptions(o), zap.RawZapOpts(uzap.WrapCore(lazyValues)))
}

// lazyValues wraps core so that the values added to a logger wait, in
// order, until an entry the level lets through is written. A value is
// then encoded as it is at that time: loggers here carry names and IDs,
// which do not change.
func lazyValues(core zapcore.Core) zapcore.Core {
	return &lazyCore{Core: core}
}

type lazyCore struct {
	// Core is the core without the values below.
	zapcore.Core
	fields []zapcore.Field

	once sync.Once
	with zapcore.Core // Core with the values, made at the first write
}

func (l *lazyCore) With(fields []zapcore.Field) zapcore.Core {
	return &lazyCore{Core: l.Core, fields: append(slices.Clip(l.fields), fields...)}
}

func (l *lazyCore) core() zapcore.Core {
	l.once.Do(func() {
		l.with = l.Core
		if len(l.fields) > 0 {
			l.with = l.Core.With(l.fields)
		}
	})
	return l.with
}

func (l *lazyCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if !l.Enabled(e.Level) {
		return ce
	}
	return l.core().Check(e, ce)
}

func (l *lazyCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	return l.core().Write(e, fields)
}

func (l *lazyCore) Sync() error {
	return l.core().Sync()
}
