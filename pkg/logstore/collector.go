package logstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Collector reads the kubelets' container log files of MPI jobs' pods and
// pushes their lines to the store. It follows the kubelet's rotation
// (0.log renamed to 0.log.TIME, a new 0.log) by file identity, so a line
// written just before a rotation is not lost, and it remembers how far it
// read each file across restarts.
type Collector struct {
	// Dirs maps each node's pod log folder (the kubelet's podLogsDir,
	// /var/log/pods on a real node) to the node's name.
	Dirs  map[string]string
	Store *Client
	// Pod resolves a pod of a log folder to its target (job, role and
	// index); false when the pod belongs to no MPI job. When the pod is
	// gone already, the collector reads its name instead.
	Pod func(ns, name, uid string) (Target, bool, bool)
	// Positions is the file the read offsets are kept in.
	Positions string
	// Interval between two passes (default 1 s).
	Interval time.Duration
	// MaxRead bounds the bytes read from one file in one pass (default
	// 8 MiB), so one chatty rank does not hold the others back.
	MaxRead int64
	// MaxTenantRead bounds the bytes read from one namespace's files in
	// one pass (default 4 MiB): a tenant that writes faster than that
	// falls behind on its own, and a pass, so every other tenant's lines,
	// is never held up by it.
	MaxTenantRead int64
	// MaxLine bounds one line put together from the runtime's partial
	// (P) records (default 128 KiB, so that its record stays within
	// Loki's largest line): a program that writes without a newline is
	// stored in pieces of this size instead of held in memory, and in the
	// positions file, without end.
	MaxLine int
	Log     io.Writer

	mu    sync.Mutex
	files map[string]*tailed // by device:inode
	// saved is what the positions file holds: a pass that moved nothing
	// (every quiet second) does not write it again.
	saved []byte
}

// tailed is one log file being read.
type tailed struct {
	Path   string `json:"path"`
	Offset int64  `json:"offset"`
	// Partial is a CRI partial line (P) waiting for its end.
	Partial string `json:"partial,omitempty"`
	PartAt  int64  `json:"partAt,omitempty"`
	// Last is the time given to the last line sent: lines that share a
	// time (the runtime stamps a burst alike) get a nanosecond each after
	// it, so the store keeps their order and no two are taken for one.
	Last int64 `json:"last,omitempty"`
	seen bool
	// file stays open while the file is tailed, as a node's log agent
	// keeps it: when the kubelet removes a deleted pod's log folder (a
	// second after its last line, as the pod ends), the lines not read yet
	// are still read from it, to its end, before it is closed.
	file *os.File
	// target and order are the file's when it was last listed, for
	// reading it once it is gone from the listing.
	target Target
	order  string
	gone   bool
}

// close closes the file, when open.
func (tf *tailed) close() {
	if tf.file != nil {
		_ = tf.file.Close()
		tf.file = nil
	}
}

// logFile is a kubelet's container log: N.log, or N.log.TIME once
// rotated (compressed ones, .gz, are older still and were read before).
var logFile = regexp.MustCompile(`^(\d+)\.log(\.(\d{8}-\d{6}))?$`)

// Run collects until ctx ends.
func (c *Collector) Run(ctx context.Context) error {
	if c.Interval == 0 {
		c.Interval = time.Second
	}
	c.load()
	t := time.NewTicker(c.Interval)
	defer t.Stop()
	for {
		if err := c.Pass(ctx); err != nil && ctx.Err() == nil {
			c.logf("log collector: %v", err)
		}
		select {
		case <-ctx.Done():
			c.mu.Lock()
			for _, f := range c.files {
				f.close()
			}
			c.mu.Unlock()
			return nil
		case <-t.C:
		}
	}
}

func (c *Collector) logf(format string, args ...any) {
	if c.Log != nil {
		fmt.Fprintf(c.Log, format+"\n", args...)
	}
}

func (c *Collector) load() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.files = map[string]*tailed{}
	b, err := os.ReadFile(c.Positions)
	if err != nil {
		return
	}
	if err := json.Unmarshal(b, &c.files); err != nil {
		c.logf("log collector: ignoring unreadable positions %s: %v", c.Positions, err)
		c.files = map[string]*tailed{}
		return
	}
	c.saved = b
}

func (c *Collector) save() error {
	if c.Positions == "" {
		return nil
	}
	b, err := json.Marshal(c.files)
	if err != nil {
		return err
	}
	if bytes.Equal(b, c.saved) {
		return nil
	}
	tmp := c.Positions + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, c.Positions); err != nil {
		return err
	}
	c.saved = b
	return nil
}

// found is a log file of a pass, in the order to read it.
type found struct {
	path   string
	id     string
	target Target
	order  string
	// rotated: a file the kubelet renamed (N.log.TIME); its successor,
	// the live N.log, continues its stream.
	rotated bool
}

// Pass reads what every log file gained since the last pass and stores it.
func (c *Collector) Pass(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.files == nil {
		c.files = map[string]*tailed{}
	}
	if c.MaxRead == 0 {
		c.MaxRead = 8 << 20
	}
	if c.MaxLine == 0 {
		c.MaxLine = DefaultMaxLine
	}
	if c.MaxTenantRead == 0 {
		c.MaxTenantRead = 4 << 20
	}
	var all []found
	for dir, node := range c.Dirs {
		pods, err := os.ReadDir(dir)
		if err != nil {
			if os.IsNotExist(err) {
				continue
			}
			return err
		}
		for _, pd := range pods {
			ns, pod, uid, ok := ParsePodDir(pd.Name())
			if !ok {
				continue
			}
			t := Target{Namespace: ns, Pod: pod, UID: uid, Node: node}
			if c.Pod != nil {
				got, mpi, known := c.Pod(ns, pod, uid)
				if known && !mpi {
					continue
				}
				if known {
					got.Namespace, got.Pod, got.UID, got.Node = ns, pod, uid, node
					t = got
				} else if t, ok = FromName(t); !ok {
					continue
				}
			} else if t, ok = FromName(t); !ok {
				continue
			}
			containers, _ := os.ReadDir(filepath.Join(dir, pd.Name()))
			for _, cd := range containers {
				if !cd.IsDir() {
					continue
				}
				tc := t
				tc.Container = cd.Name()
				files, _ := os.ReadDir(filepath.Join(dir, pd.Name(), cd.Name()))
				for _, f := range files {
					m := logFile.FindStringSubmatch(f.Name())
					if m == nil {
						continue
					}
					p := filepath.Join(dir, pd.Name(), cd.Name(), f.Name())
					var st syscall.Stat_t
					if err := syscall.Stat(p, &st); err != nil {
						continue
					}
					// Rotated files (with a time) before the live one, and
					// a restart's 1.log after 0.log.
					n, _ := strconv.Atoi(m[1])
					order := fmt.Sprintf("%s/%08d/%s", p[:len(p)-len(f.Name())], n, "1"+m[3])
					if m[3] == "" {
						order = fmt.Sprintf("%s/%08d/%s", p[:len(p)-len(f.Name())], n, "2")
					}
					all = append(all, found{path: p, id: fileID(st), target: tc, order: order, rotated: m[3] != ""})
				}
			}
		}
	}
	// Files read before and gone from the listing since (the kubelet
	// removed their pod's folder, or a rotated file): read to their end
	// from the open file, in their stream's order.
	listed := make(map[string]bool, len(all))
	for _, f := range all {
		listed[f.id] = true
	}
	for id, tf := range c.files {
		if tf.file != nil && !listed[id] {
			tf.gone = true
			all = append(all, found{path: tf.Path, id: id, target: tf.target, order: tf.order, rotated: true})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].order < all[j].order })
	for _, f := range c.files {
		f.seen = false
	}
	batches := map[string]map[string]*PushStream{} // tenant → stream key → lines
	type advance struct {
		f                    *tailed
		offset, partAt, last int64
		partial, path        string
	}
	moves := map[string][]advance{} // tenant → files read
	lastOf := map[string]int64{}    // stream → last time sent, this pass
	// Each tenant reads at most MaxTenantRead a pass, shared among its
	// files (at least 256 KiB each), so one chatty file of a tenant does
	// not hold its other files back either.
	readOf, filesOf := map[string]int64{}, map[string]int64{}
	for _, fd := range all {
		filesOf[fd.target.Namespace]++
	}
	for _, fd := range all {
		if tf := c.files[fd.id]; tf != nil && tf.Last > lastOf[streamKey(fd)] {
			lastOf[streamKey(fd)] = tf.Last
		}
	}
	// A stream's files are read in order, oldest first: a rotated file
	// with lines still unread this pass holds its successor back (held),
	// and a line it ends without finishing (a CRI partial line: the
	// kubelet rotated between its pieces) goes on in the successor
	// (carried), not lost with the old file's position.
	held := map[string]bool{}
	carried := map[string]int{} // stream → its rotated file's index in moves[tenant]
	for _, fd := range all {
		stream := streamKey(fd)
		tf := c.files[fd.id]
		// A file seen under another name is the same one renamed by a
		// rotation (0.log → 0.log.TIME); any other name means the inode
		// was reused by a new file.
		if tf != nil && !tf.gone && tf.Path != fd.path && !strings.HasPrefix(fd.path, tf.Path+".") {
			tf.close()
			tf = nil
		}
		if tf == nil {
			tf = &tailed{Path: fd.path}
			c.files[fd.id] = tf
		}
		tf.seen = true
		if !tf.gone {
			tf.target, tf.order = fd.target, fd.order
		}
		// Lines of a rotated file and of its successor are one stream: the
		// successor's times start after the old file's last.
		if tf.Last == 0 {
			tf.Last = lastOf[stream]
		}
		if held[stream] {
			continue
		}
		tenant := fd.target.Namespace
		budget := c.MaxTenantRead - readOf[tenant]
		if budget <= 0 {
			// This tenant had its share of the pass: the rest waits for
			// the next one.
			held[stream] = true
			continue
		}
		share := max(c.MaxTenantRead/filesOf[tenant], 256<<10)
		from := tf
		if i, ok := carried[stream]; ok && !fd.rotated && tf.Offset == 0 && tf.Partial == "" {
			// The successor, never read yet, starts with the rest of the
			// line its predecessor left open.
			prev := &moves[tenant][i]
			from = &tailed{Path: tf.Path, Partial: prev.partial, PartAt: prev.partAt, Last: max(tf.Last, prev.last)}
			prev.partial, prev.partAt = "", 0
		}
		f, err := c.open(tf, fd)
		if err != nil {
			c.logf("log collector: %s: %v", fd.path, err)
			if fd.rotated {
				held[stream] = true
			}
			continue
		}
		entries, off, partial, partAt, last, err := c.read(f, from, min(budget, share, c.MaxRead))
		if err != nil {
			c.logf("log collector: %s: %v", fd.path, err)
			if fd.rotated {
				held[stream] = true
			}
			continue
		}
		if fd.rotated {
			if st, err := f.Stat(); err != nil || off < st.Size() {
				held[stream] = true // the rest of it first, next pass
			}
		}
		if tf.gone && !held[stream] && partial != "" {
			if _, err := os.Stat(filepath.Dir(fd.path)); os.IsNotExist(err) {
				// The pod's folder is gone with the file: no successor
				// will end the line it left open, so it is stored as it is.
				var e Entry
				e, last = entryAfter(time.Unix(0, partAt).UTC(), last, partial)
				entries = append(entries, e)
				partial, partAt = "", 0
			}
		}
		if off > tf.Offset {
			readOf[tenant] += off - tf.Offset
		}
		moves[tenant] = append(moves[tenant], advance{f: tf, offset: off, partial: partial, partAt: partAt, last: last, path: fd.path})
		if fd.rotated && !held[stream] && partial != "" {
			carried[stream] = len(moves[tenant]) - 1
		} else if fd.rotated {
			delete(carried, stream)
		}
		if last > lastOf[stream] {
			lastOf[stream] = last
		}
		if len(entries) == 0 {
			continue
		}
		labels := fd.target.Labels()
		key := fmt.Sprint(labels)
		if batches[tenant] == nil {
			batches[tenant] = map[string]*PushStream{}
		}
		s := batches[tenant][key]
		if s == nil {
			s = &PushStream{Labels: labels}
			batches[tenant][key] = s
		}
		s.Entries = append(s.Entries, entries...)
	}
	tenants := make([]string, 0, len(moves))
	for t := range moves {
		tenants = append(tenants, t)
	}
	sort.Strings(tenants)
	var failed error
	for _, tenant := range tenants {
		var streams []PushStream
		for _, s := range batches[tenant] {
			streams = append(streams, *s)
		}
		if err := c.pushAll(ctx, tenant, streams); err != nil {
			var refused *RefusedError
			if !errors.As(err, &refused) {
				// The store is down or busy: this tenant's files do not
				// advance, and the next pass sends their lines again.
				// Other tenants' lines go on.
				failed = err
				continue
			}
			// The store refuses these lines for good (too old, too long):
			// sending them again would hold the tenant's logs back for ever.
			c.logf("log collector: dropped lines of namespace %s the store refused: %v", tenant, err)
		}
		for _, m := range moves[tenant] {
			m.f.Offset, m.f.Partial, m.f.PartAt, m.f.Last, m.f.Path = m.offset, m.partial, m.partAt, m.last, m.path
		}
	}
	// Files gone from disk are forgotten once read to their end (their
	// open file was), or when never opened: a pod's whole life between two
	// passes.
	for id, f := range c.files {
		if f.gone && f.file != nil {
			if st, err := f.file.Stat(); err == nil && f.Offset < st.Size() {
				continue
			}
		}
		if !f.seen || f.gone {
			f.close()
			delete(c.files, id)
		}
	}
	if err := c.save(); err != nil {
		return err
	}
	return failed
}

// pushAll sends a tenant's streams in pushes of at most ~1 MiB (Loki's
// gRPC limit between its parts is 4 MiB by default).
func (c *Collector) pushAll(ctx context.Context, tenant string, streams []PushStream) error {
	const most = 1 << 20
	var batch []PushStream
	size := 0
	for _, s := range streams {
		for len(s.Entries) > 0 {
			n, sz := 0, 0
			for n < len(s.Entries) && size+sz < most {
				sz += len(s.Entries[n].Line) + 64
				n++
			}
			batch = append(batch, PushStream{Labels: s.Labels, Entries: s.Entries[:n]})
			size += sz
			s.Entries = s.Entries[n:]
			if size >= most {
				if err := c.Store.Push(ctx, tenant, batch); err != nil {
					return err
				}
				batch, size = nil, 0
			}
		}
	}
	if len(batch) > 0 {
		return c.Store.Push(ctx, tenant, batch)
	}
	return nil
}

// DefaultMaxLine is the longest line the collector puts together from
// partial records: half Loki's default max_line_size (256 KB), so that
// the line's record (its JSON, quotes and all) stays within it.
const DefaultMaxLine = 128 << 10

// open returns tf's open file, opening fd's path the first time: the file
// then stays open until it is read to its end after it is gone (a gone
// file is listed only while open). A path
// that names another file by the time it is opened (rotated in between)
// is left for the next pass.
func (c *Collector) open(tf *tailed, fd found) (*os.File, error) {
	if tf.file != nil {
		return tf.file, nil
	}
	f, err := os.Open(fd.path)
	if err != nil {
		return nil, err
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil || fileID(st) != fd.id {
		_ = f.Close()
		return nil, fmt.Errorf("renamed while opened; read next pass")
	}
	tf.file = f
	return f, nil
}

// fileID is a file's identity, which a rename keeps: device and inode.
func fileID(st syscall.Stat_t) string { return fmt.Sprintf("%d:%d", st.Dev, st.Ino) }

// entryAfter is msg's entry at time at, or a nanosecond after last when
// at is not later (lines stamped alike keep their order and stay apart in
// the store), and the entry's time as the new last.
func entryAfter(at time.Time, last int64, msg string) (Entry, int64) {
	if at.UnixNano() <= last {
		at = time.Unix(0, last+1).UTC()
	}
	return Entry{Time: at, Line: EncodeRecord(at, msg)}, at.UnixNano()
}

// read returns the complete lines of f after tf's offset, and the offset
// after the last one.
func (c *Collector) read(f *os.File, tf *tailed, most int64) ([]Entry, int64, string, int64, int64, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, tf.Offset, tf.Partial, tf.PartAt, tf.Last, err
	}
	off := tf.Offset
	if st.Size() < off {
		// Truncated (copytruncate): start again.
		off = 0
	}
	n := st.Size() - off
	if n <= 0 {
		return nil, off, tf.Partial, tf.PartAt, tf.Last, nil
	}
	if n > most {
		n = most
	}
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, off); err != nil && err != io.EOF {
		return nil, tf.Offset, tf.Partial, tf.PartAt, tf.Last, err
	}
	var out []Entry
	partial, partAt, last := tf.Partial, tf.PartAt, tf.Last
	start := 0
	for i, b := range buf {
		if b != '\n' {
			continue
		}
		line := string(buf[start:i])
		start = i + 1
		cl, err := ParseCRI(line)
		if err != nil {
			continue
		}
		msg := cl.Message
		at := cl.Time
		if cl.Partial {
			if partial == "" {
				partAt = cl.Time.UnixNano()
			}
			partial += cl.Message
			if len(partial) < c.MaxLine {
				continue
			}
			// A line without end as long as a whole line may be: stored as
			// a piece of its own, and the rest starts the next piece.
			msg = partial
		} else if partial != "" {
			msg = partial + msg
		}
		if partial != "" {
			at = time.Unix(0, partAt).UTC()
			partial, partAt = "", 0
		}
		var e Entry
		e, last = entryAfter(at, last, msg)
		out = append(out, e)
	}
	if start == 0 && int64(len(buf)) == most {
		// A record longer than a read (the runtime writes records of at
		// most 16 KiB, so this is no CRI file's): its start is dropped
		// rather than holding the file back for ever.
		start = len(buf)
	}
	return out, off + int64(start), partial, partAt, last, nil
}

// streamKey is the stream a log file's lines go to: its pod and
// container (a rotated file and its successor share one).
func streamKey(f found) string {
	return f.target.Namespace + "/" + f.target.Pod + "/" + f.target.UID + "/" + f.target.Container
}
