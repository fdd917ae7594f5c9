package dashboard

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/jobview"
)

// JobQuery is what a list of jobs shows: its filters, its order and its
// page, read from the URL of /api/jobs and /api/stream (the list page's
// toolbar). The server filters, sorts and pages, so a list of 10,000 jobs
// sends and draws one page, not 10,000 rows.
type JobQuery struct {
	// Name matches job names: a regular expression, case-insensitive, or
	// where it is not one, text the name contains.
	Name string
	// Runtime and Phase, when set, must equal the job's.
	Runtime string
	Phase   api.Phase
	// Sort is a column: name, namespace, phase or created (the default).
	Sort string
	// Asc orders up; the default is newest first for created, A to Z for
	// the others.
	Asc bool
	// Page (from 1) of PerPage jobs; PerPage 0 is every job on one page.
	Page, PerPage int
	// AllFrameworks lists the TrainJobs of other frameworks too
	// (frameworks=all); the list is of MPI jobs otherwise, by the rule
	// admission, the CLI and the SDK share (jobview.IsMPIJob).
	AllFrameworks bool

	re *regexp.Regexp
}

// JobPage is a page of the job list.
type JobPage struct {
	Jobs []jobview.Job `json:"jobs"`
	// Total is how many jobs match the filters, All how many there are.
	Total int `json:"total"`
	All   int `json:"all"`
	// Runtimes is every runtime the jobs use (filters aside): the runtime
	// filter's choices.
	Runtimes []string `json:"runtimes"`
	// Page is the page sent: the one asked for, or the last when fewer
	// jobs match now. PerPage 0 means every job.
	Page    int `json:"page"`
	PerPage int `json:"perPage"`
}

const (
	maxPerPage   = 1000
	maxNameQuery = 253
)

// sortKeys are the columns a list sorts by.
var sortKeys = []string{"name", "namespace", "phase", "created"}

// ParseJobQuery reads a JobQuery from a URL's query; an error names the
// parameter, its value and what it takes.
func ParseJobQuery(v url.Values) (JobQuery, error) {
	q := JobQuery{Name: v.Get("name"), Runtime: v.Get("runtime"), Sort: "created", Page: 1}
	if len(q.Name) > maxNameQuery {
		return q, fmt.Errorf("name: %d characters; a name filter has at most %d (a job's name does too)", len(q.Name), maxNameQuery)
	}
	if q.Name != "" {
		if re, err := regexp.Compile("(?i)" + q.Name); err == nil {
			q.re = re
		}
	}
	if p := v.Get("phase"); p != "" {
		if !slices.Contains(api.Phases, api.Phase(p)) {
			return q, fmt.Errorf("phase %q is not a phase; use one of %s", p, phaseNames())
		}
		q.Phase = api.Phase(p)
	}
	if s := v.Get("sort"); s != "" {
		if !slices.Contains(sortKeys, s) {
			return q, fmt.Errorf("sort %q is not a column to sort by; use one of %s", s, strings.Join(sortKeys, ", "))
		}
		q.Sort = s
	}
	q.Asc = q.Sort != "created"
	switch o := v.Get("order"); o {
	case "":
	case "asc":
		q.Asc = true
	case "desc":
		q.Asc = false
	default:
		return q, fmt.Errorf("order %q: use asc or desc", o)
	}
	switch f := v.Get("frameworks"); f {
	case "", "mpi":
	case "all":
		q.AllFrameworks = true
	default:
		return q, fmt.Errorf("frameworks %q: use mpi (the default: MPI jobs only) or all (every TrainJob)", f)
	}
	if p := v.Get("page"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 {
			return q, fmt.Errorf("page %q: a page number, from 1", p)
		}
		q.Page = n
	}
	if p := v.Get("perPage"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > maxPerPage {
			return q, fmt.Errorf("perPage %q: how many jobs a page holds, from 1 to %d", p, maxPerPage)
		}
		q.PerPage = n
	}
	return q, nil
}

func phaseNames() string {
	names := make([]string, len(api.Phases))
	for i, p := range api.Phases {
		names[i] = string(p)
	}
	return strings.Join(names, ", ")
}

// matches says whether j passes q's filters.
func (q JobQuery) matches(j *jobview.Job) bool {
	if q.Runtime != "" && j.Runtime != q.Runtime {
		return false
	}
	if q.Phase != "" && j.Phase != q.Phase {
		return false
	}
	if q.Name == "" {
		return true
	}
	if q.re != nil {
		return q.re.MatchString(j.Name)
	}
	return strings.Contains(strings.ToLower(j.Name), strings.ToLower(q.Name))
}

// Apply filters, sorts and pages jobs (in any order). It leaves jobs as
// they are; the page holds copies of its rows.
func (q JobQuery) Apply(jobs []jobview.Job) JobPage {
	out := JobPage{Runtimes: []string{}, Page: 1, PerPage: q.PerPage}
	seen := map[string]bool{}
	shown := make([]*jobview.Job, 0, len(jobs))
	for i := range jobs {
		j := &jobs[i]
		if !j.MPI && !q.AllFrameworks {
			// Another framework's TrainJob: not in an MPI view.
			continue
		}
		out.All++
		if j.Runtime != "" && !seen[j.Runtime] {
			seen[j.Runtime] = true
			out.Runtimes = append(out.Runtimes, j.Runtime)
		}
		if q.matches(j) {
			shown = append(shown, j)
		}
	}
	sort.Strings(out.Runtimes)
	q.sort(shown)
	out.Total = len(shown)
	from, to := 0, len(shown)
	if q.PerPage > 0 {
		last := max(1, (len(shown)+q.PerPage-1)/q.PerPage)
		out.Page = min(max(q.Page, 1), last)
		from = (out.Page - 1) * q.PerPage
		to = min(from+q.PerPage, len(shown))
	}
	out.Jobs = make([]jobview.Job, 0, to-from)
	for _, j := range shown[from:to] {
		out.Jobs = append(out.Jobs, *j)
	}
	return out
}

// sort orders jobs by q's column, then newest first, then by namespace and
// name: the same jobs always come in the same order.
func (q JobQuery) sort(jobs []*jobview.Job) {
	var by func(a, b *jobview.Job) int
	switch q.Sort {
	case "name":
		by = func(a, b *jobview.Job) int { return strings.Compare(a.Name, b.Name) }
	case "namespace":
		by = func(a, b *jobview.Job) int { return strings.Compare(a.Namespace, b.Namespace) }
	case "phase":
		by = func(a, b *jobview.Job) int {
			return slices.Index(api.Phases, a.Phase) - slices.Index(api.Phases, b.Phase)
		}
	default:
		by = func(a, b *jobview.Job) int { return a.Created.Compare(b.Created) }
	}
	slices.SortFunc(jobs, func(a, b *jobview.Job) int {
		c := by(a, b)
		if !q.Asc {
			c = -c
		}
		if c != 0 {
			return c
		}
		if c := b.Created.Compare(a.Created); c != 0 {
			return c
		}
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
}
