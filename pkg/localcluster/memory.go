package localcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// MemoryRow is the resident memory of one part of the running cluster.
type MemoryRow struct {
	Name  string
	Bytes int64
}

// Memory reports the resident set size of every cluster process (by pid
// file) and the memory charged to each real node's cgroup (containerd
// shims and containers), so the cluster's footprint can be measured.
func Memory(opts Options) ([]MemoryRow, int64) {
	var rows []MemoryRow
	entries, _ := os.ReadDir(opts.runDir())
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".pid") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(opts.runDir(), e.Name()))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || !processAlive(pid) {
			continue
		}
		rows = append(rows, MemoryRow{Name: strings.TrimSuffix(e.Name(), ".pid"), Bytes: rss(pid)})
	}
	for i := 1; i <= 8; i++ {
		n := nodeName(i)
		b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/memory", n, "memory.usage_in_bytes"))
		if err != nil {
			b, err = os.ReadFile(filepath.Join("/sys/fs/cgroup", n, "memory.current"))
		}
		if err != nil {
			continue
		}
		v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err == nil {
			rows = append(rows, MemoryRow{Name: n + " pods (cgroup)", Bytes: v})
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Bytes > rows[j].Bytes })
	var total int64
	for _, r := range rows {
		total += r.Bytes
	}
	return rows, total
}

// rss reads VmRSS of pid in bytes.
func rss(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			f := strings.Fields(line)
			if len(f) >= 2 {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				return kb * 1024
			}
		}
	}
	return 0
}
