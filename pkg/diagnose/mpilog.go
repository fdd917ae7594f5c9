package diagnose

import (
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/utils/ptr"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/logs"
)

// Reasons read from the program's and MPI's own words in the Launcher log.
const (
	ReasonNotEnoughSlots     = "NotEnoughSlots"
	ReasonExecutableNotFound = "ExecutableNotFound"
	ReasonProgramError       = "ProgramError"
	ReasonGPUOutOfMemory     = "GPUOutOfMemory"
	ReasonMPIAbort           = "MPIAbort"
	ReasonRankFailed         = "RankFailed"
	ReasonTransportError     = "TransportError"
	// ReasonCannotStart: nothing that frees up lets the job start.
	ReasonCannotStart = "CannotStart"
	// ReasonPodsRefused: admission refuses the job's pods (Pod Security,
	// a policy webhook, an invalid pod); retrying cannot change it.
	ReasonPodsRefused = "PodsRefused"
	// ReasonPermissionDenied: the Launcher may not read the SSH key or the
	// hostfile, or the Workers refuse its key: the pods' security context
	// does not match the files Trainer mounts.
	ReasonPermissionDenied = "PermissionDenied"
	// ReasonNoProgress: a running job's Launcher printed nothing for longer
	// than its progress timeout; the job keeps running.
	ReasonNoProgress = "NoProgress"
	// ReasonEnvForwardConflict: Open MPI 4's mpirun refused -x beside the
	// OMPI_MCA_mca_base_env_list that mpijob sets for data connections and
	// PVCs (an image whose mpirun is Open MPI's own, not mpijob's).
	ReasonEnvForwardConflict = "EnvForwardConflict"
	// ReasonNoGPU: the program asked for a GPU where its rank has none.
	ReasonNoGPU = "NoGPU"
	// ReasonGPUSharedByRanks: NCCL refused two ranks on one GPU.
	ReasonGPUSharedByRanks = "GPUSharedByRanks"
	// ReasonNCCLError: NCCL's own error on the failing rank (a system,
	// internal, CUDA or usage error), not a peer that went away.
	ReasonNCCLError = "NCCLError"
	// ReasonCollectiveTimeout: a rank waited in a collective (NCCL, gloo)
	// longer than its timeout: another rank stopped taking part.
	ReasonCollectiveTimeout = "CollectiveTimeout"
)

// ncclOwn is NCCL's account of its own failure on this rank, as PyTorch
// raises it: "NCCL error in: …, unhandled system error (run with
// NCCL_DEBUG=INFO for details), NCCL version 2.18.1".
var ncclOwn = regexp.MustCompile(`NCCL error in: \S+, (unhandled system error|internal error|unhandled cuda error|invalid usage|invalid argument)[^\n]*?NCCL version ([\d.]+)`)

// ncclWarn is NCCL's last WARN line, which says what failed.
var ncclWarn = regexp.MustCompile(`NCCL WARN ([^\n]+)`)

// programRules come before the infrastructure rules (logRules): each
// names the rank, the Worker where it can tell, the evidence line and
// ranked next steps (one per line, most likely fix first). Test vectors:
// testdata/launcher-logs, captured from real jobs on the local cluster
// (OpenMPI 4) or taken from the MPI implementations' own message texts.
var programRules = []logRule{
	{
		re: regexp.MustCompile(`with both the "-x" method and by setting the MCA parameter "mca_base_env_list"`),
		explain: func(_ []string, in Input) finding {
			return finding{reason: ReasonEnvForwardConflict,
				message: "mpirun refused to start: the command passes variables with -x, and the job's data connections or PVCs pass theirs through OMPI_MCA_mca_base_env_list; the Launcher image's mpirun is Open MPI 4's own, which does not take both.",
				next: ranked(
					step("Run the job on an mpijob Open MPI image (the runtime's image, or one built FROM ghcr.io/mpijob/openmpi:4.1): its mpirun passes both."),
					stepf("Or pass every variable with -x and clear the list: sh -c 'unset OMPI_MCA_mca_base_env_list; exec mpirun -x AWS_ACCESS_KEY_ID -x AWS_SECRET_ACCESS_KEY -x ... -x NAME PROGRAM' (the list's names are in the Launcher's environment: %s).", cli("describe")),
					step("Or leave -x out and run on mpi-openmpi5, whose Open MPI 5 takes both."))}
		},
	},
	{
		// PyTorch: "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB ..."
		re: regexp.MustCompile(`(?:CUDA out of memory\. Tried to allocate ([0-9.]+ [KMGT]?i?B)|CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation|CUBLAS_STATUS_ALLOC_FAILED)`),
		explain: func(m []string, in Input) finding {
			what := "CUDA out of memory"
			if m[1] != "" {
				what += ", while allocating " + m[1]
			}
			who, ref := rankOf(in)
			return finding{reason: ReasonGPUOutOfMemory, subject: ref,
				message: fmt.Sprintf("%s ran out of GPU memory (%s).", capitalize(who), what),
				next: ranked(
					stepf("Reduce the batch size (or the model's size per GPU) and run it again: %s.", cli("clone", "--", "<command with a smaller batch>")),
					step("Run fewer slots per worker, so fewer ranks share one GPU (--slots-per-worker)."),
					step("Use GPUs with more memory (a runtime or node selector for larger GPUs)."),
					step("Save GPU memory in the program: mixed precision or gradient checkpointing."))}
		},
	},
	{
		// NCCL: "Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 60"
		re: regexp.MustCompile(`Duplicate GPU detected : rank (\d+) and rank (\d+) both on CUDA device (\S+)`),
		explain: func(m []string, in Input) finding {
			_, slots := shape(in)
			return finding{reason: ReasonGPUSharedByRanks, subject: rankRef(in, m[1]),
				message: fmt.Sprintf("Ranks %s and %s (%s) both use GPU %s, and NCCL refuses two ranks on one GPU: the program picks the same GPU for every rank of a Worker, or the Worker has fewer GPUs than its %s.", m[2], m[1], rankWorker(in, m[1]), m[3], api.Count(slots, "slot", "slots")),
				next: ranked(
					step("Give each rank a GPU of its own by its local rank: torch.cuda.set_device(local_rank), with local_rank from OMPI_COMM_WORLD_LOCAL_RANK (Open MPI) or MPI_LOCALRANKID (MPICH, Intel MPI); examples/training/cnn_torch.py does."),
					stepf("Run as many slots per Worker as it has GPUs: `%s`.", cli("clone", "--slots-per-worker", "G", "--gpus", "G")))}
		},
	},
	{
		// The program asked for a GPU where there is none: cnn_torch.py's
		// "--device cuda: rank 0 sees no GPU", PyTorch's and CUDA's own.
		re: regexp.MustCompile(`(?:--device cuda: rank (\d+) sees no GPU[^\n]*|No CUDA GPUs are available|Found no NVIDIA driver on your system|Torch not compiled with CUDA enabled|no CUDA-capable device is detected|CUDA driver initialization failed)`),
		explain: func(m []string, in Input) finding {
			who, ref := rankOf(in)
			if m[1] != "" {
				who, ref = fmt.Sprintf("rank %s (%s)", m[1], rankWorker(in, m[1])), rankRef(in, m[1])
			}
			what := strings.TrimSpace(m[0])
			return finding{reason: ReasonNoGPU, subject: ref,
				message: fmt.Sprintf("The program asked for a GPU, and %s has none it can use (%s).", who, trimMessage(what, 200)),
				next: ranked(
					stepf("Ask for GPUs on a GPU runtime: `%s` (the cluster needs nodes with nvidia.com/gpu; `kubectl mpijob create --dry-run=server` says whether it can place them).", cli("clone", "--runtime", "mpi-openmpi-gpu", "--gpus", "1")),
					step("Or run it on CPUs: the program's CPU option (--device cpu for the reference workloads)."),
					step("\"Torch not compiled with CUDA enabled\" means the image's PyTorch is a CPU build: use an image with a CUDA build of PyTorch."))}
		},
	},
	{
		re: ncclOwn,
		explain: func(m []string, in Input) finding {
			detail := ""
			if w := ncclWarn.FindAllStringSubmatch(in.LauncherLog, -1); len(w) > 0 {
				detail = ": " + trimMessage(strings.TrimSpace(w[len(w)-1][1]), 200)
			}
			who, ref, _ := tracebackRankOf(in)
			return finding{reason: ReasonNCCLError, subject: ref,
				message: fmt.Sprintf("NCCL %s failed on %s with %s%s.", m[2], who, m[1], detail),
				next: ranked(
					step("Run it again with NCCL_DEBUG=INFO in --env: NCCL then names the transport and the call that failed."),
					step("An \"unhandled system error\" is most often the network or /dev/shm: check that the job's pods may reach each other (the namespace's NetworkPolicies), set NCCL_SOCKET_IFNAME=eth0, and give the Workers a memory-backed /dev/shm (the GPU runtimes mount one)."),
					step("All Workers must run the same image (the same NCCL and CUDA)."))}
		},
	},
	{
		re: regexp.MustCompile(`(?s)Traceback \(most recent call last\):\n(.*?)\n([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning)\b[^\n]*)`),
		explain: func(m []string, in Input) finding {
			where := ""
			if files := pyFrame.FindAllStringSubmatch(m[1], -1); len(files) > 0 {
				last := files[len(files)-1]
				where = fmt.Sprintf(" at %s:%s", last[1], last[2])
			}
			who, ref, own := tracebackRankOf(in)
			if own {
				return finding{reason: ReasonProgramError, subject: ref,
					message: fmt.Sprintf("The Launcher's own command raised %s%s, outside mpirun: no rank had started or was running it.", strings.TrimSpace(m[2]), where),
					next: ranked(
						stepf("Fix the error in the program"+where+"; the whole traceback is in `%s`.", cli("logs")),
						step("The Launcher runs this part itself (before or after mpirun, or instead of it): start the ranks with mpirun (mpijob-mpiexec on MPICH and Intel MPI) for it to run on the Workers."))}
			}
			return finding{reason: ReasonProgramError, subject: ref,
				message: fmt.Sprintf("The program raised %s%s on %s.", strings.TrimSpace(m[2]), where, who),
				next: ranked(
					stepf("Fix the error in the program"+where+"; the whole traceback is in `%s`.", cli("logs", "--all")),
					onOneWorker(in, "Reproduce it on one Worker first: %s."))}
		},
	},
	{
		re: regexp.MustCompile(`(?s)(?:MPI_ABORT was invoked on rank (\d+) in communicator (\S+)\s+with errorcode (-?\d+)|application called MPI_Abort\(([^,]+), (-?\d+)\) - process (\d+))`),
		explain: func(m []string, in Input) finding {
			rank, comm, code := m[1], m[2], m[3]
			if rank == "" {
				rank, comm, code = m[6], m[4], m[5]
			}
			return finding{reason: ReasonMPIAbort, subject: rankRef(in, rank),
				message: fmt.Sprintf("Rank %s (%s) called MPI_Abort with error code %s on %s: the program stopped the job itself.", rank, rankWorker(in, rank), code, comm),
				next: ranked(
					stepf("Read what rank "+rank+" printed before it aborted (`%s`): the program says why.", cli("logs", "--all")),
					step("Look up error code "+code+" in the program's documentation."))}
		},
	},
	{
		re: regexp.MustCompile(`(?s)(?:mpirun(?:\.openmpi)? was unable to launch the specified application as it could not access\s+or execute an executable:|mpirun(?:\.openmpi)? was unable to find the specified executable file, and therefore\s+did not launch the job\.).*?Executable:\s*(\S+)\s+Node:\s*(\S+)`),
		explain: func(m []string, in Input) finding {
			return finding{reason: ReasonExecutableNotFound, subject: hostRef(m[2]),
				message: fmt.Sprintf("mpirun could not start %s on %s: the Workers' image%s has no such executable, or may not run it.", m[1], workerHost(m[2]), named(in.WorkerImage)),
				next: ranked(
					step("Use a Worker image that contains "+m[1]+" (kubectl mpijob create --image, or --worker-image): the ranks run in the Workers' image, not the Launcher's."),
					step("Or fix the path in the command."),
					step("If the file is there, make it executable for the image's user (chmod +x)."))}
		},
	},
	{
		// MPICH/Intel MPI (Hydra): "execvp error on file /opt/app/train (No such file or directory)"
		re: regexp.MustCompile(`\[proxy:[^@\]]*@([^\]\s]+)\][^\n]*execvp error on file (\S+) \(([^)]+)\)`),
		explain: func(m []string, in Input) finding {
			return finding{reason: ReasonExecutableNotFound, subject: hostRef(m[1]),
				message: fmt.Sprintf("mpiexec could not start %s on %s: %s (the Workers' image%s).", m[2], workerHost(m[1]), strings.ToLower(m[3]), named(in.WorkerImage)),
				next: ranked(
					step("Use a Worker image that contains "+m[2]+" (kubectl mpijob create --image, or --worker-image): the ranks run in the Workers' image, not the Launcher's."),
					step("Or fix the path in the command."))}
		},
	},
	{
		// OpenSSH: "Permissions 0644 for '/home/mpiuser/.ssh/id_rsa' are too
		// open." / "Load key "…": Permission denied" (the key Secret's mode or
		// owner does not suit the user the Launcher runs as).
		re: regexp.MustCompile(`(?:Permissions (0\d+) for '([^']+)' are too open|Load key "([^"]+)": (Permission denied|bad permissions))`),
		explain: func(m []string, in Input) finding {
			why := fmt.Sprintf("its mode %s is open to others, so ssh ignores it", m[1])
			key := m[2]
			if key == "" {
				key, why = m[3], strings.ToLower(m[4])
			}
			return finding{reason: ReasonPermissionDenied, subject: api.LauncherRef(),
				message: fmt.Sprintf("The Launcher cannot use the job's SSH key %s (%s), so it cannot log in to the Workers.", key, why),
				next: ranked(
					step("Keep the runtime's securityContext (runAsUser 1000, fsGroup 1000): Trainer mounts the key Secret for that user; a runtimePatch or image that changes the user breaks it."),
					step("If you built the Launcher image yourself, do not chmod or chown "+path.Dir(key)+" in it: the key Secret is mounted there (docs/runtimes.md#images)."))}
		},
	},
	{
		// OpenSSH: "mpiuser@hello-node-0-1.hello: Permission denied (publickey)."
		re: regexp.MustCompile(`(?m)(?:\S+@)?(\S+?): Permission denied \(publickey[^)]*\)`),
		explain: func(m []string, in Input) finding {
			return finding{reason: ReasonPermissionDenied, subject: hostRef(m[1]),
				message: fmt.Sprintf("%s refused the Launcher's SSH key (Permission denied (publickey)): its sshd cannot read the job's authorized key, or runs as another user.", capitalize(workerHost(m[1]))),
				next: ranked(
					step("Keep the runtime's Worker securityContext (runAsUser 1000, fsGroup 1000) and sshd command: Trainer mounts the authorized key for that user."),
					step("A Worker image of your own must run sshd as the runtime's image does (FROM the runtime's image, docs/runtimes.md#images)."))}
		},
	},
	{
		// OpenMPI: "Open RTE was unable to open the hostfile: /etc/mpi/hostfile";
		// Hydra: "HYDU_parse_hostfile (…): unable to open host file: …".
		re: regexp.MustCompile(`(?s)(?:Open RTE was unable to open the hostfile:\s+(\S+)|unable to open host file: (\S+))`),
		explain: func(m []string, in Input) finding {
			file := m[1] + m[2]
			return finding{reason: ReasonPermissionDenied, subject: api.LauncherRef(),
				message: fmt.Sprintf("The Launcher cannot open the hostfile %s that Trainer mounts: it is missing or not readable for the Launcher's user.", file),
				next: ranked(
					step("Keep the runtime's Launcher securityContext (runAsUser 1000, fsGroup 1000) and do not replace the Trainer-mounted "+path.Dir(file)+" with a volume of your own."),
					step("Pass the hostfile mpirun is given by the runtime (leave --hostfile out of the command unless you know its path)."))}
		},
	},
	{
		// MPICH and Intel MPI: "Abort(1) on node 1 (rank 1 in comm 0): Fatal error in PMPI_Send: …"
		re: regexp.MustCompile(`Abort\((-?\d+)\) on node (\d+) \(rank (\d+) in comm (\d+)\): ([^\n]+)`),
		explain: func(m []string, in Input) finding {
			return finding{reason: ReasonMPIAbort, subject: rankRef(in, m[3]),
				message: fmt.Sprintf("Rank %s (%s) aborted with error code %s: %s", m[3], rankWorker(in, m[3]), m[1], trimMessage(strings.TrimSpace(m[5]), 300)),
				next: ranked(
					stepf("Read what rank "+m[3]+" printed before it aborted (`%s`): the MPI error stack names the call that failed.", cli("logs", "--all")),
					stepf("A \"Fatal error in PMPI_…\" is often a mismatch between ranks (message sizes, communicators): reproduce it with fewer Workers (%s).", cli("clone", "--workers", "2")))}
		},
	},
	{
		re: regexp.MustCompile(`(?s)There are not enough slots available in the system to satisfy the (\d+)\s+slots?\s+that were requested by the application:\s+(\S+)`),
		explain: func(m []string, in Input) finding {
			asked, _ := strconv.Atoi(m[1])
			workers, slots := shape(in)
			have := workers * slots
			need := (asked + slots - 1) / slots
			return finding{reason: ReasonNotEnoughSlots,
				message: fmt.Sprintf("mpirun asked for %d ranks of %s, but the job has %s × %s = %d slots.", asked, m[2], api.Count(workers, "Worker", "Workers"), api.Count(slots, "slot", "slots"), have),
				next: ranked(
					step(fmt.Sprintf("Ask mpirun for at most %d ranks (-np %d), or leave -np out: mpirun then starts one rank per slot.", have, have)),
					stepf(fmt.Sprintf("Or give the job the slots: %%s (or --slots-per-worker %d).", (asked+workers-1)/workers), cli("clone", "--workers", strconv.Itoa(need))),
					step("Or add --oversubscribe to mpirun to run more ranks than slots (ranks then share CPUs)."))}
		},
	},
	{
		// PyTorch's watchdog: "Watchdog caught collective operation timeout:
		// WorkNCCL(SeqNum=9, OpType=ALLREDUCE) ran for 600000 milliseconds".
		re: regexp.MustCompile(`(?:Watchdog caught collective operation timeout: (\S+?)\(SeqNum=\d+, OpType=(\w+)[^\n]*?ran for (\d+) milliseconds|NCCL communicator was aborted[^\n]*)`),
		explain: func(m []string, in Input) finding {
			what := "a collective"
			if m[2] != "" {
				secs, _ := strconv.Atoi(m[3])
				what = fmt.Sprintf("%s (%s) for %ds", m[2], strings.TrimPrefix(m[1], "Work"), secs/1000)
			}
			who, ref := rankOf(in)
			return finding{reason: ReasonCollectiveTimeout, subject: ref,
				message: fmt.Sprintf("%s waited in %s, longer than its timeout: another rank stopped taking part (it failed, hung, or is far slower).", capitalize(who), what),
				next: ranked(
					stepf("Find the rank that stopped: its own error is earlier in the logs (`%s`); the ranks that waited only report the timeout.", cli("logs", "--all")),
					step("If one step is legitimately that slow (a large checkpoint on one rank), raise the timeout in init_process_group(timeout=...)."))}
		},
	},
	{
		re: regexp.MustCompile(`(?m)(NCCL WARN [^\n]*|[^\n]*\bncclSystemError\b[^\n]*|[^\n]*\bncclUnhandledCudaError\b[^\n]*|[^\n]*\bncclRemoteError\b[^\n]*|[^\n]*UCX\s+ERROR[^\n]*)`),
		explain: func(m []string, in Input) finding {
			who, ref := rankOf(in)
			return finding{reason: ReasonTransportError, subject: ref,
				message: fmt.Sprintf("The ranks' communication library failed on %s: %s", who, trimMessage(strings.TrimSpace(m[1]), 300)),
				next: ranked(
					step("Check that the job's pods may reach each other (a NetworkPolicy of the namespace may block them) and that all Workers run the same image."),
					step("Run it again with NCCL_DEBUG=INFO (NCCL) or UCX_LOG_LEVEL=info (UCX) in --env to see which transport fails; set NCCL_SOCKET_IFNAME or UCX_TLS to one the nodes have."))}
		},
	},
}

// rankFailedRules are the most generic: a rank exited non-zero.
var rankFailedRules = []logRule{
	{
		re: regexp.MustCompile(`(?s)Process name: \[\[\d+,\d+\],(\d+)\]\s+Exit code:\s+(\d+)`),
		explain: func(m []string, in Input) finding {
			msg := fmt.Sprintf("Rank %s (%s) exited with code %s, the first rank to fail, so mpirun stopped the job.", m[1], rankWorker(in, m[1]), m[2])
			if last := lastWords(in.LauncherLog, m[1]); last != "" {
				msg += fmt.Sprintf(" Its last output: %q.", last)
			}
			return finding{reason: ReasonRankFailed, message: msg, subject: rankRef(in, m[1]),
				next: ranked(
					stepf("Read rank "+m[1]+"'s output (`%s`) for the program's own error.", cli("logs", "--all")),
					onOneWorker(in, "Reproduce it on one Worker: %s."))}
		},
	},
	{
		// OpenMPI sometimes stops at its first banner, without the
		// "Process name" block that names the rank (a race inside mpirun
		// seen on the local cluster): the exit code is mpirun's own, which
		// is the failed rank's.
		re: regexp.MustCompile(`Primary job\s+terminated normally, but (\d+) process(?:es)?\s+returned\s+a non-zero exit code`),
		explain: func(m []string, in Input) finding {
			code := "non-zero"
			if c, ok := launcherExitCode(in.Launcher); ok {
				code = strconv.Itoa(int(c))
			}
			msg := fmt.Sprintf("A rank exited with code %s, so mpirun stopped the job (mpirun did not say which rank).", code)
			if last := lastWords(in.LauncherLog, ""); last != "" {
				msg += fmt.Sprintf(" The last output before: %q.", last)
			}
			return finding{reason: ReasonRankFailed, message: msg,
				next: ranked(
					stepf("Read the ranks' output (`%s`) for the program's own error.", cli("logs", "--all")),
					onOneWorker(in, "Reproduce it on one Worker: %s."))}
		},
	},
	{
		// MPICH/Intel MPI (Hydra), a rank killed by a signal:
		// "RANK 1 PID 123 RUNNING AT host ... KILLED BY SIGNAL: 9 (Killed)".
		re: regexp.MustCompile(`(?s)BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES.*?(?:RANK (\d+) )?PID \d+ RUNNING AT (\S+).*?KILLED BY SIGNAL: (\d+) \(([^)]+)\)`),
		explain: func(m []string, in Input) finding {
			who := "A rank"
			if m[1] != "" {
				who = "Rank " + m[1]
			}
			if m[3] == "9" {
				return finding{reason: ReasonRankKilled, subject: hostRef(m[2]),
					message: fmt.Sprintf("%s on %s was killed (signal 9), most likely because it ran out of memory and the system stopped it to protect the node.", who, workerHost(m[2])),
					next: ranked(
						stepf("Give each Worker more memory or run fewer slots per worker; `%s` shows each Worker's memory limit.", cli("describe")),
						stepf("Read the ranks' output (`%s`) for what it did last.", cli("logs", "--all")))}
			}
			return finding{reason: ReasonRankSignaled, subject: hostRef(m[2]),
				message: fmt.Sprintf("%s on %s crashed on signal %s (%s).", who, workerHost(m[2]), m[3], m[4]),
				next: ranked(
					stepf("Read the ranks' output around the crash (`%s`).", cli("logs", "--all")),
					onOneWorker(in, "Reproduce it on one Worker: %s."))}
		},
	},
	{
		// MPICH/Intel MPI (Hydra).
		re: regexp.MustCompile(`(?s)BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES.*?(?:RANK (\d+) )?PID \d+ RUNNING AT (\S+).*?EXIT (?:STATUS|CODE): (\d+)`),
		explain: func(m []string, in Input) finding {
			who := "A rank"
			if m[1] != "" {
				who = "Rank " + m[1]
			}
			return finding{reason: ReasonRankFailed, subject: hostRef(m[2]),
				message: fmt.Sprintf("%s on %s exited with code %s, so mpiexec stopped the job.", who, workerHost(m[2]), m[3]),
				next: ranked(
					stepf("Read the ranks' output (`%s`) for the program's own error.", cli("logs", "--all")),
					onOneWorker(in, "Reproduce it on one Worker: %s."))}
		},
	},
}

var (
	pyFrame = regexp.MustCompile(`File "([^"]+)", line (\d+)`)
	// failedRank: Open MPI 4's "Process name: [[38994,1],1]", Open MPI
	// 5's "Process name: [prterun-JOB-launcher-0-0-15@1,1]".
	failedRank  = regexp.MustCompile(`Process name: \[(?:\[\d+,\d+\],|[^\s@\]]+@\d+,)(\d+)\]`)
	bannerStart = regexp.MustCompile(`(?m)^-{20,}$`)
)

// shape is the job's Workers and slots per worker (1 when unset).
func shape(in Input) (workers, slots int) {
	workers, slots = 1, 1
	if tr := in.TrainJob.Spec.Trainer; tr != nil {
		workers = int(ptr.Deref(tr.NumNodes, 1))
		slots = int(ptr.Deref(tr.NumProcPerNode, 1))
	}
	return max(workers, 1), max(slots, 1)
}

// tracebackRankOf names the rank that printed the first traceback, read
// from its rank tag, else the rank mpirun reported (rankOf). launcher is
// true when the traceback is the Launcher's own output (a command it runs
// itself, before, after or instead of mpirun): untagged, while no rank
// printed one and none failed by mpirun's or Hydra's account.
func tracebackRankOf(in Input) (who string, ref *api.PodRef, launcher bool) {
	untagged := false
	for _, line := range strings.Split(in.LauncherLog, "\n") {
		if t, ok := logs.SplitRank(line); ok && strings.HasPrefix(strings.TrimSpace(t.Message), "Traceback (most recent call last):") {
			r := strconv.Itoa(t.Rank)
			return fmt.Sprintf("rank %s (%s)", r, rankWorker(in, r)), rankRef(in, r), false
		} else if !ok && strings.HasPrefix(strings.TrimSpace(line), "Traceback (most recent call last):") {
			untagged = true
		}
	}
	// Without tags (a runtime that does not tag) a rank's traceback is
	// untagged too: mpirun's account of a failed rank tells it apart.
	if untagged && !failedRank.MatchString(in.LauncherLog) && !strings.Contains(in.LauncherLog, "BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES") {
		return "the Launcher", api.LauncherRef(), true
	}
	who, ref = rankOf(in)
	return who, ref, false
}

// rankOf names the failed rank when mpirun reported it, and its Worker.
func rankOf(in Input) (string, *api.PodRef) {
	if m := failedRank.FindStringSubmatch(in.LauncherLog); m != nil {
		return fmt.Sprintf("rank %s (%s)", m[1], rankWorker(in, m[1])), rankRef(in, m[1])
	}
	return "a rank", nil
}

// rankRef is the Worker where rank ran under mpirun's default placement
// (by slot: ranks 0..S-1 on Worker 0, and so on); nil when rank is not a
// number or beyond the job's Workers.
func rankRef(in Input, rank string) *api.PodRef {
	r, err := strconv.Atoi(rank)
	if err != nil {
		return nil
	}
	workers, slots := shape(in)
	if w := r / slots; w < workers {
		return api.WorkerRef(int32(w))
	}
	return nil
}

// rankWorker names rankRef's Worker for people.
func rankWorker(in Input, rank string) string {
	if ref := rankRef(in, rank); ref != nil {
		return fmt.Sprintf("Worker %d", ref.Index)
	}
	return "Worker unknown"
}

// lastWords is the last line the program printed before mpirun's first
// banner: rank's own last line (of its stderr, if it wrote any) when the
// runtime tags lines with ranks and rank printed any, else the last line
// of any rank; without its rank tag.
func lastWords(log, rank string) string {
	// mpirun forwards the ranks' output while it prints its own banners
	// (dashed lines around its text): the rank's last line may come before
	// or after them, so every banner is left out, not only what follows
	// the first.
	var last, own, ownErr string
	inBanner := false
	for _, line := range strings.Split(log, "\n") {
		l := strings.TrimSpace(line)
		switch {
		case bannerStart.MatchString(l):
			inBanner = !inBanner
		case !inBanner && l != "":
			if t, ok := logs.SplitRank(l); ok {
				if msg := strings.TrimSpace(t.Message); msg != "" {
					last = msg
					if strconv.Itoa(t.Rank) == rank {
						own = msg
						if t.Stream == "stderr" {
							ownErr = msg
						}
					}
				}
				continue
			}
			last = l
		}
	}
	// The rank's error output says more than its last progress line.
	switch {
	case ownErr != "":
		last = ownErr
	case own != "":
		last = own
	}
	return trimMessage(last, 200)
}
