package diagnose

import (
	"fmt"
	"regexp"

	"github.com/mpijob/mpijob/pkg/api"
)

// Reasons for MPI features that pods shape: one-sided windows, shared
// memory and spawn across Workers (docs/runtimes.md, "One-sided MPI (RMA)
// and spawn across Workers", measured with mpi4py's own test suite).
const (
	// ReasonRMAWindowRefused: Open MPI 4.1 could not create a one-sided
	// window over TCP at MPI_THREAD_MULTIPLE.
	ReasonRMAWindowRefused = "RMAWindowRefused"
	// ReasonSharedWindowAcrossWorkers: a shared-memory window over ranks
	// on different Workers, which cannot share memory.
	ReasonSharedWindowAcrossWorkers = "SharedWindowAcrossWorkers"
	// ReasonNoSlotsToSpawn: MPI_Comm_spawn found every slot taken.
	ReasonNoSlotsToSpawn = "NoSlotsToSpawn"
)

// mpiLimit is an MPI feature that a program used as it works on one
// machine, and that works differently across pods: the error that says so
// (failed: in the Launcher's whole log; running: in the failed rank's
// last lines, failed's when nil), what happened, and the ranked fixes.
type mpiLimit struct {
	reason  string
	failed  *regexp.Regexp
	running *regexp.Regexp
	what    string
	steps   []api.Step
}

// mpiLimits are tried before the program's own traceback: the exception
// is MPI's, and its fix is a setting or a pattern, not the program's line.
var mpiLimits = []mpiLimit{
	{
		// Open MPI 4.1: osc/rdma needs an RDMA network; osc/pt2pt offers
		// no window at MPI_THREAD_MULTIPLE, mpi4py's default level.
		reason: ReasonRMAWindowRefused,
		failed: regexp.MustCompile(`MPI_ERR_WIN: invalid window`),
		what:   "Open MPI 4.1 could not create its one-sided (RMA) window (MPI_ERR_WIN): its osc/rdma component needs an RDMA network, which pods do not have, and its osc/pt2pt component offers no window at MPI_THREAD_MULTIPLE, the level mpi4py asks for by default",
		steps: []api.Step{
			stepf("Run it with Open MPI's osc/pt2pt below MPI_THREAD_MULTIPLE: `%s` (a C program: MPI_Init, or MPI_Init_thread at most MPI_THREAD_SERIALIZED).", cli("clone", "--", "mpirun", "--mca", "osc", "pt2pt", "-x", "MPI4PY_RC_THREAD_LEVEL=serialized", "<command>")),
			stepf("Or run it on MPICH, whose one-sided MPI works across Workers: `%s`.", cli("clone", "--runtime", "mpi-mpich", "--", "mpijob-mpiexec", "<command>")),
		},
	},
	{
		reason: ReasonSharedWindowAcrossWorkers,
		failed: regexp.MustCompile(`MPI_ERR_RMA_SHARED`),
		what:   "it asked for a shared-memory window (Win.Allocate_shared, MPI_Win_allocate_shared) over ranks on different Workers, and MPI refused it (MPI_ERR_RMA_SHARED): memory is shared only between the ranks of one Worker (one pod), as between the ranks of one machine",
		steps: []api.Step{
			step("Split the communicator by Worker first and share memory within it: node = comm.Split_type(MPI.COMM_TYPE_SHARED), then MPI.Win.Allocate_shared(size, disp_unit, comm=node) (in C: MPI_Comm_split_type with MPI_COMM_TYPE_SHARED)."),
			step("To reach the memory of ranks on other Workers, use a one-sided window over the whole communicator (Win.Allocate or Win.Create) instead."),
		},
	},
	{
		// Open MPI's own words; a rank that only raised MPI_ERR_SPAWN
		// while the others wait is the same cause on Open MPI.
		reason:  ReasonNoSlotsToSpawn,
		failed:  regexp.MustCompile(`All nodes which are allocated for this job are already filled`),
		running: regexp.MustCompile(`MPI_ERR_SPAWN`),
		what:    "MPI_Comm_spawn could not start the new ranks (MPI_ERR_SPAWN): mpirun gave every slot of the job's Workers to the first ranks (Trainer's hostfile gives each Worker the job's slots per worker), and Open MPI starts spawned ranks only on free slots (\"All nodes which are allocated for this job are already filled\")",
		steps: []api.Step{
			stepf("On Open MPI 4.1 (mpi-openmpi), let the spawned ranks share the Workers' slots: `%s`.", cli("clone", "--", "mpirun", "--oversubscribe", "<command>")),
			stepf("Or run it on MPICH, whose mpiexec starts spawned ranks beside the others: `%s`.", cli("clone", "--runtime", "mpi-mpich", "--", "mpijob-mpiexec", "<command>")),
			step("Or leave slots free for them: start fewer ranks than the job has slots (mpirun -np N), or give the job more slots per worker (--slots-per-worker). The spawned program must be where every Worker sees it (the image, a ConfigMap or a shared folder), not in one rank's /tmp."),
		},
	},
}

// limitRules are mpiLimits as rules of a failed job's Launcher log.
var limitRules = mpiLimitRules()

func mpiLimitRules() []logRule {
	out := make([]logRule, 0, len(mpiLimits))
	for _, l := range mpiLimits {
		out = append(out, logRule{
			re: l.failed,
			explain: func(_ []string, in Input) finding {
				who, ref, _ := tracebackRankOf(in)
				return finding{reason: l.reason, message: fmt.Sprintf("%s failed: %s.", capitalize(who), l.what), next: ranked(l.steps...), subject: ref}
			},
		})
	}
	return out
}

// runningMPILimit is the limit a running job's failed rank hit, by the
// error it raised (nil when none).
func runningMPILimit(lines ...string) *mpiLimit {
	for i := range mpiLimits {
		re := mpiLimits[i].running
		if re == nil {
			re = mpiLimits[i].failed
		}
		for _, line := range lines {
			if re.MatchString(line) {
				return &mpiLimits[i]
			}
		}
	}
	return nil
}
