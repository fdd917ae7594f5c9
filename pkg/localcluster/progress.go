package localcluster

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// Progress prints numbered steps with the elapsed time so a long first build
// shows where it is and how long each part took.
type Progress struct {
	mu    sync.Mutex
	out   io.Writer
	start time.Time
	step  int
}

// NewProgress writes steps to out.
func NewProgress(out io.Writer) *Progress {
	return &Progress{out: out, start: time.Now()}
}

// Step announces a new step and returns a function that reports it done.
func (p *Progress) Step(format string, args ...any) func() {
	p.mu.Lock()
	p.step++
	n := p.step
	msg := fmt.Sprintf(format, args...)
	fmt.Fprintf(p.out, "[%3d] %-6s %s ...\n", n, p.elapsed(), msg)
	p.mu.Unlock()
	began := time.Now()
	stop, stopped := make(chan struct{}), make(chan struct{})
	// A step that takes long (a cold build) says every 30 s that it still runs.
	go func() {
		defer close(stopped)
		t := time.NewTicker(heartbeat)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				p.mu.Lock()
				fmt.Fprintf(p.out, "[%3d] %-6s %s: still running (%s so far)\n", n, p.elapsed(), msg, time.Since(began).Round(time.Second))
				p.mu.Unlock()
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			// The heartbeat has stopped before "done" is printed, so no
			// "still running" line can follow it.
			close(stop)
			<-stopped
			p.mu.Lock()
			defer p.mu.Unlock()
			fmt.Fprintf(p.out, "[%3d] %-6s %s: done in %s\n", n, p.elapsed(), msg, time.Since(began).Round(100*time.Millisecond))
		})
	}
}

// heartbeat is how often a running step reports that it still runs.
var heartbeat = 30 * time.Second

// Infof prints a line under the current step.
func (p *Progress) Infof(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.out, "      %-6s   %s\n", p.elapsed(), fmt.Sprintf(format, args...))
}

// Elapsed is the time since the progress started.
func (p *Progress) Elapsed() time.Duration { return time.Since(p.start) }

func (p *Progress) elapsed() string {
	d := time.Since(p.start).Round(time.Second)
	return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
}
