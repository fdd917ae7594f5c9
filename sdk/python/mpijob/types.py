"""Data types of the mpijob SDK: one job, its status, runtimes, lifecycle events.

The vocabulary is the one of the CLI and the dashboard: Launcher, Worker,
slots per worker, runtime, phase.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from dataclasses import fields as _fields
from datetime import datetime, timedelta, timezone
from typing import Any, Literal, cast, get_args

from .constants import CREATOR_ANNOTATION as CREATOR_ANNOTATION
from .constants import GROUP as GROUP
from .constants import QUEUE_LABEL as QUEUE_LABEL
from .constants import STATUS_ANNOTATION as STATUS_ANNOTATION
from .constants import VERSION as VERSION
from .nextsteps import Command as Command
from .nextsteps import Step as Step
from .progress import Progress

Phase = Literal["Pending", "Queued", "GangScheduling", "Starting", "Running", "Succeeded", "Failed", "Suspended"]
"""A job's phase, the same words as ``kubectl mpijob`` and the dashboard (Go: api.Phase)."""
PHASES: tuple[Phase, ...] = get_args(Phase)
LauncherState = Literal["", "NotCreated", "Pending", "Running", "Succeeded", "Failed", "Deleted"]
"""The Launcher's state in a job's status ("" before the manager wrote one; Go: api.LauncherState)."""
LAUNCHER_STATES: tuple[LauncherState, ...] = get_args(LauncherState)
EventKind = Literal["submitted", "queued", "scheduling", "running", "completed", "failed", "suspended", "progress", "event"]
"""What a ``LifecycleEvent`` reports."""
EVENT_KINDS: tuple[EventKind, ...] = get_args(EventKind)
FINISHED = ("Succeeded", "Failed")
# Reasons after which no wait helps: the job can never start as it is.
NEVER_STARTS = ("CannotStart", "PodsRefused")


def _pod_ref(raw: Any) -> PodRef | None:
    if not isinstance(raw, dict) or clean_text(raw.get("role", "")) not in ("launcher", "worker"):
        return None
    return PodRef(role=clean_text(raw["role"]), index=int(raw.get("index", 0)))


def _time(v: str | None) -> datetime | None:
    if not v:
        return None
    return datetime.fromisoformat(v.replace("Z", "+00:00"))


# Go's api.CleanText, tested with the same vectors (pkg/api/testdata/clean-text.json):
# terminal escape sequences, control characters but newline and tab, and Unicode
# direction overrides never reach a terminal or a notebook from a job's status.
_ESCAPE_SEQ = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?")
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _int_or_none(v: Any) -> int | None:
    """A whole number of a status, or None when it is not one."""
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def clean_text(s: Any) -> str:
    """``s`` without what a terminal would act on rather than show."""
    if not isinstance(s, str):
        return "" if s is None else str(s)
    return _CONTROL.sub("", _ESCAPE_SEQ.sub("", s))


@dataclass
class JobSpec:
    """What :meth:`MPIJobClient.create_job` submits, as one typed object: the client passes it
    to its backend whole, and :meth:`MPIJobClient.clone_job`'s overrides are its fields (but
    ``name`` and the storage ones, which a clone keeps). Each field is the create_job argument
    of its name; the backend checks them, naming the field of a bad one."""

    name: str
    command: Sequence[str] | None
    workers: int
    image: str | None = None
    slots_per_worker: int | None = None
    resources_per_worker: dict[str, str | int] | None = None
    launcher_resources: dict[str, str | int] | None = None
    runtime: str = "mpi-openmpi"
    env: dict[str, str] | None = None
    node_selector: dict[str, str] | None = None
    volumes: Sequence[dict[str, Any]] | None = None
    queue: str | None = None
    worker_image: str | None = None
    launcher_image: str | None = None
    env_from_secret: dict[str, str] | None = None
    data_connection: str | Sequence[str] | None = None
    pvc: str | Sequence[str] | None = None
    config_map: str | Sequence[str] | None = None
    timeout: str | None = None
    retries: int | None = None
    resume_from: str | None = None
    priority: str | None = None
    tolerations: Sequence[str | dict[str, Any]] | None = None
    image_pull_secrets: str | Sequence[str] | None = None
    description: str | None = None
    launcher_flags: str | Sequence[str] | None = None
    end_stuck_after: str | None = None
    grace_period: str | None = None
    service_account: str | None = None
    register_model: str | None = None
    register_artifact: str | None = None

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """The fields, in order: create_job's arguments but ``dry_run``."""
        return tuple(f.name for f in _fields(cls))


#: The fields of a job a clone keeps as they are: its name is new, and its data connections,
#: PVCs and ConfigMaps are the original's (``runtimePatches`` and environment copied whole).
CLONE_KEEPS = ("name", "data_connection", "pvc", "config_map")


@dataclass
class PodRecord:
    """One of a job's pods as mpijob-manager last saw it (kept after the pod is gone)."""

    role: str  # "launcher" or "worker"
    index: int
    pod: str
    node: str = ""
    #: In words: "Running", "Completed (exit 0)", "OOMKilled (exit 137)", "Pending: Unschedulable".
    state: str = ""
    restarts: int = 0
    #: True once the pod was removed; ``state`` is its last.
    gone: bool = False
    #: How its container ended (``state`` is of that container), when it did: 137 for a kill.
    exit_code: int | None = None
    #: The signal that ended it (9: SIGKILL), else 0.
    signal: int = 0


@dataclass
class PodRef:
    """One of a job's pods by its role: the Launcher, or Worker ``index`` (``status.subject``)."""

    role: str  # "launcher" or "worker"
    index: int = 0


@dataclass
class FailedPod:
    """A Launcher or Worker that failed, as mpijob-manager's diagnosis names it (``status.failed``)."""

    role: str  # "launcher" or "worker"
    index: int
    #: The status's reason for the pod the diagnosis names ("WorkerOOMKilled"), else its last state
    #: in words ("Error (exit 1)").
    reason: str
    pod: str = ""
    node: str = ""
    #: How it ended, from its record (None: no record with an exit code, e.g. a Worker that an
    #: Event names); ``signal`` is the one that ended it (9: SIGKILL), else 0.
    exit_code: int | None = None
    signal: int = 0


@dataclass
class Transition:
    """A change of a job's phase or reason, as the job's status kept it (the cluster's Events expire)."""

    time: datetime | None
    phase: str
    reason: str = ""
    message: str = ""


@dataclass
class JobStatus:
    """What mpijob-manager says about a job (its JobStatus, ``jobstatuses.mpijob.dev``; an older
    manager's annotation ``mpijob.dev/status``). The SDK reads it beside each TrainJob it reads; while
    watching, a change of the status alone shows within 5 s.

    ``from_manager`` is False when the manager has not written one (not
    installed, or not yet): the phase then comes from Trainer's conditions and
    the details are empty. ``next_steps`` are ranked, most likely first
    (``next_step`` is the first); they name this SDK's calls, e.g.
    ``client.get_logs("hello", worker="all")``, where the CLI shows its commands.
    """

    phase: Phase = "Pending"
    reason: str = ""
    message: str = ""
    next_step: str = ""
    next_steps: list[str] = field(default_factory=list)
    #: The next steps as data: each one's text as the manager wrote it (the CLI's command in
    #: it) and that command (:class:`Step`); ``next_steps`` are their texts in this SDK's words.
    steps: list[Step] = field(default_factory=list)
    launcher: LauncherState = ""
    workers_ready: int = 0
    workers_total: int = 0
    slots_per_worker: int = 0
    #: What each Worker pod asks of GPUs: "2" (nvidia.com/gpu), "1 amd.com/gpu", "" for none.
    gpus_per_worker: str = ""
    queue_position: int | None = None
    start_time: datetime | None = None
    #: When the job's first Launcher started, once a retry or a preemption started it again
    #: (``start_time`` is then this attempt's): a job's duration counts every attempt.
    first_start_time: datetime | None = None
    completion_time: datetime | None = None
    creator: str = ""
    from_manager: bool = True
    #: When mpijob-manager wrote this status (None: unknown).
    observed_time: datetime | None = None
    #: Why this status may no longer be current ("" while mpijob-manager runs): the client
    #: fills it from the manager's Lease, e.g. "mpijob-manager is not running (its Lease
    #: was last renewed 6m ago): this status is as it saw the job 12m ago, and may be stale".
    stale_note: str = ""
    #: The Launcher and Workers as the manager last saw them, kept once JobSet removed them.
    pods: list[PodRecord] = field(default_factory=list)
    #: The job's transitions (oldest first, the latest 20), kept after its Events expire.
    history: list[Transition] = field(default_factory=list)
    #: The Launcher and Workers that failed: read these instead of parsing ``message``.
    failed: list[FailedPod] = field(default_factory=list)
    #: The pod the diagnosis is about (the Worker that ran out of memory, the failed rank's
    #: Worker, the Launcher), as the manager's rule found it; None for the job as a whole.
    subject: PodRef | None = None
    #: The job's runtime as the manager names it (the runtime it was derived from); "" until
    #: the manager writes a status.
    runtime: str = ""
    #: Where the program took up again from a checkpoint ("resumed from epoch 12 of 30
    #: (checkpoint written 4 minutes earlier)"; Go's ``api.Resumed.Text``), "" when it
    #: started from its first step.
    resumed: str = ""
    #: How often the job started again ("retry 1 of 3, preempted once"), "" for a first attempt.
    attempts: str = ""

    @property
    def finished(self) -> bool:
        """True once the job Succeeded or Failed."""
        return self.phase in FINISHED

    @classmethod
    def from_trainjob(cls, obj: dict[str, Any]) -> JobStatus:
        meta = obj.get("metadata") or {}
        ann = meta.get("annotations") or {}
        creator = ann.get(CREATOR_ANNOTATION, "")
        raw = ann.get(STATUS_ANNOTATION)
        if raw:
            try:
                s = json.loads(raw)
                steps = [st for st in (Step.from_dict(d, clean_text) for d in s.get("steps") or []) if st is not None]
                first = steps[0].sdk_text() if steps else clean_text(s.get("nextStep", ""))
                if not steps:
                    # A status written before steps were data: its texts alone, as they are.
                    steps = [Step(clean_text(x)) for x in (s.get("nextSteps") or ([s["nextStep"]] if s.get("nextStep") else []))
                             if isinstance(x, str)]
                words = [st.sdk_text() for st in steps]
                return cls(
                    phase=cast(Phase, clean_text(s.get("phase", "Pending"))), reason=clean_text(s.get("reason", "")),
                    message=clean_text(s.get("message", "")),
                    # The manager names the CLI's commands; Python users get this SDK's calls.
                    next_step=first, next_steps=words, steps=steps,
                    launcher=cast(LauncherState, clean_text(s.get("launcher", ""))),
                    workers_ready=s.get("workersReady", 0), workers_total=s.get("workersTotal", 0),
                    slots_per_worker=s.get("slotsPerWorker", 0), gpus_per_worker=clean_text(s.get("gpusPerWorker", "")),
                    runtime=clean_text(s.get("runtime", "")),
                    queue_position=s.get("queuePosition"),
                    start_time=_time(s.get("startTime")), first_start_time=_time(s.get("firstStartTime")),
                    completion_time=_time(s.get("completionTime")),
                    creator=creator, observed_time=_time(s.get("observedTime")),
                    pods=[PodRecord(role=clean_text(p.get("role", "")), index=int(p.get("index", 0)), pod=clean_text(p.get("pod", "")),
                                    node=clean_text(p.get("node", "")), state=clean_text(p.get("state", "")),
                                    restarts=int(p.get("restarts", 0)), gone=bool(p.get("gone", False)),
                                    exit_code=_int_or_none(p.get("exitCode")), signal=_int_or_none(p.get("signal")) or 0)
                          for p in s.get("pods") or []],
                    history=[Transition(time=_time(t.get("time")), phase=clean_text(t.get("phase", "")),
                                        reason=clean_text(t.get("reason", "")), message=clean_text(t.get("message", "")))
                             for t in s.get("history") or []],
                    failed=[FailedPod(role=clean_text(f.get("role", "")), index=int(f.get("index", 0)),
                                      reason=clean_text(f.get("reason", "")), pod=clean_text(f.get("pod", "")),
                                      node=clean_text(f.get("node", "")), exit_code=_int_or_none(f.get("exitCode")),
                                      signal=_int_or_none(f.get("signal")) or 0)
                            for f in s.get("failed") or []],
                    subject=_pod_ref(s.get("subject")),
                    resumed=resumed_text(s.get("resumed")), attempts=attempts_text(s.get("attempts")),
                )
            except (ValueError, TypeError, AttributeError):
                pass
        # Until the manager writes one: Go's api.StatusOf, tested with the same vectors
        # (pkg/api/testdata/fallback-status.json).
        st = cls(creator=creator, from_manager=False)
        spec = obj.get("spec") or {}
        st.workers_total = ((spec.get("trainer") or {}).get("numNodes")) or 0
        suspended = bool(spec.get("suspend"))
        for c in (obj.get("status") or {}).get("conditions") or []:
            if c.get("status") != "True":
                continue
            if c.get("type") == "Complete":
                st.phase, st.completion_time, st.message = "Succeeded", _time(c.get("lastTransitionTime")), ""
            elif c.get("type") == "Failed":
                st.phase, st.completion_time, st.message = "Failed", _time(c.get("lastTransitionTime")), clean_text(c.get("message", ""))
            elif c.get("type") == "Suspended":
                suspended = True
        if not st.finished and suspended:
            # A queue holds suspended jobs until they fit.
            st.phase = "Queued" if QUEUE_LABEL in (meta.get("labels") or {}) else "Suspended"
        return st


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _num(f: Any) -> str:
    return str(int(f)) if float(f).is_integer() else f"{float(f):g}"


def _ago(seconds: float) -> str:
    """Go's ``api.Ago``: a duration in whole units."""
    s = int(seconds)
    if s < 60:
        return _count(s, "second", "seconds")
    if s < 3600:
        return _count(s // 60, "minute", "minutes")
    if s < 48 * 3600:
        return _count(s // 3600, "hour", "hours")
    return _count(s // 86400, "day", "days")


def resumed_text(r: Any) -> str:
    """Go's ``api.Resumed.Text`` of a status's ``resumed`` ("" when there is none)."""
    if not isinstance(r, dict) or not isinstance(r.get("epoch"), (int, float)):
        return ""
    out = f"resumed from epoch {_num(r['epoch'])}"
    if r.get("totalEpochs"):
        out += f" of {_num(r['totalEpochs'])}"
    if r.get("step"):
        out += f", step {_num(r['step'])} of the next"
    notes = []
    if r.get("from"):
        notes.append("another job's checkpoint, " + clean_text(str(r["from"])))
    if r.get("ageSeconds"):
        notes.append(f"checkpoint written {_ago(float(r['ageSeconds']))} earlier")
    return out + (f" ({'; '.join(notes)})" if notes else "")


def attempts_text(a: Any) -> str:
    """Go's ``api.Attempts.Text``: "retry 2 of 3, preempted once" ("" for a first attempt)."""
    if not isinstance(a, dict):
        return ""
    parts = []
    retries, most, preempted = int(a.get("retries") or 0), int(a.get("maxRetries") or 0), int(a.get("preemptions") or 0)
    if retries > 0:
        parts.append(f"retry {retries} of {most}" if most > 0 else f"retry {retries}")
    if preempted == 1:
        parts.append("preempted once")
    elif preempted > 1:
        parts.append(f"preempted {preempted} times")
    return ", ".join(parts)


@dataclass
class MPIJob:
    """An MPI job: a TrainJob on an MPI runtime. ``raw`` is the TrainJob as the API returned it;
    from :meth:`MPIJobClient.list_jobs` (without ``full=True``) its metadata only
    (``kind: PartialObjectMetadata``): the list reads no specs when mpijob-manager's status
    names each job's runtime, Workers and slots. ``row()`` is the job as the line
    ``kubectl mpijob get -o wide`` prints (:class:`JobRow`), for a table in a notebook::

        for j in client.list_jobs():
            print(j.row())"""

    name: str
    namespace: str
    runtime: str
    workers: int
    slots_per_worker: int
    status: JobStatus
    created: datetime | None = None
    queue: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)
    #: The last progress the job's ranks reported (mpijob.progress), None when they report none.
    progress: Progress | None = None
    #: From a dry run (``create_job(..., dry_run=True)``): whether the cluster can place the job now,
    #: one line each for the fit in what the nodes have free, the free GPUs (for a user who may
    #: list nodes) and its Kueue queue (position and estimated start), as
    #: ``kubectl mpijob create --dry-run=server`` prints them.
    placement: list[str] = field(default_factory=list)
    #: The job's framework (:mod:`mpijob.frameworks`): "mpi", or, from ``list_jobs(all_frameworks=True)``,
    #: another framework's ("torch", "jax", ... "unknown").
    framework: str = "mpi"

    @classmethod
    def from_trainjob(cls, obj: dict[str, Any], launcher_hosts_ranks: bool = False) -> MPIJob:
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        tr = spec.get("trainer") or {}
        nodes = tr.get("numNodes") or 1
        status = JobStatus.from_trainjob(obj)
        return cls(
            name=meta.get("name", ""), namespace=meta.get("namespace", ""),
            runtime=(meta.get("labels") or {}).get("mpijob.dev/base-runtime") or (spec.get("runtimeRef") or {}).get("name", ""),
            workers=nodes - 1 if launcher_hosts_ranks else nodes,
            # The manager's (it reads them from the job's runtime when the job does not set
            # them), else the job's own: Go's jobview.JobWith takes them in the same order.
            slots_per_worker=(status.slots_per_worker if status.from_manager and status.slots_per_worker > 0 else 0)
            or tr.get("numProcPerNode") or 1,
            status=status, created=_time(meta.get("creationTimestamp")),
            queue=(meta.get("labels") or {}).get(QUEUE_LABEL), raw=obj,
            progress=Progress.of_job(obj),
        )

    def row(self, now: datetime | None = None) -> JobRow:
        """The job as one line of a list, the cells ``kubectl mpijob get -o wide`` prints (Go's
        ``jobview.RowOf``; both are tested with pkg/jobview/testdata/jobs.json). ``now`` is when the
        age and the duration are taken (default: now)."""
        now = now or datetime.now(timezone.utc)
        st = self.status
        phase = st.phase if not (st.phase == "Queued" and st.queue_position is not None) else f"Queued (#{st.queue_position})"
        gpus = st.gpus_per_worker if st.from_manager and st.gpus_per_worker else _gpus_of(self.raw)
        ran = "-"
        started = st.first_start_time or st.start_time  # every attempt counts
        if started is not None:
            ran = human_duration((st.completion_time or now) - started)
        return JobRow(
            name=self.name, namespace=self.namespace, runtime=self.runtime, phase=phase,
            workers=f"{st.workers_ready}/{st.workers_total}" if st.from_manager else f"?/{st.workers_total}",
            progress=str(self.progress or "") or "-",
            age=human_duration(now - self.created) if self.created else "-", duration=ran,
            slots=max(self.slots_per_worker, 1), gpus=gpus or "-", creator=st.creator or "-",
            reason=(st.reason or "-") if st.from_manager else NO_STATUS_REASON,
        )

    @classmethod
    def from_metadata(cls, obj: dict[str, Any]) -> MPIJob | None:
        """The job from its metadata alone (a ``PartialObjectMetadata``, or a whole TrainJob) when
        mpijob-manager's status names its runtime, Workers and slots per worker, as it does once
        it has seen the job; None otherwise (read the whole TrainJob: :meth:`from_trainjob`).
        Go's ``api.RowFromStatus`` is the same rule (pkg/api/testdata/row-from-status.json)."""
        status = JobStatus.from_trainjob(obj)
        if not status.from_manager or not status.runtime or status.slots_per_worker < 1:
            return None
        meta = obj.get("metadata") or {}
        return cls(
            name=meta.get("name", ""), namespace=meta.get("namespace", ""), runtime=status.runtime,
            workers=status.workers_total, slots_per_worker=status.slots_per_worker, status=status,
            created=_time(meta.get("creationTimestamp")), queue=(meta.get("labels") or {}).get(QUEUE_LABEL),
            raw=obj, progress=Progress.of_job(obj),
        )


#: A row's reason while mpijob-manager has written no status for the job (Go: ``jobview.NoStatusReason``).
NO_STATUS_REASON = "(no mpijob-manager status)"


@dataclass(frozen=True)
class JobRow:
    """A job as one line of a list (:meth:`MPIJob.row`): the cells ``kubectl mpijob get -o wide``
    prints, "-" for nothing. ``phase`` carries a queued job's place ("Queued (#2)"); ``workers`` is
    ready/total, "?/2" while mpijob-manager has written no status."""

    name: str
    namespace: str
    runtime: str
    phase: str
    workers: str
    progress: str
    age: str
    duration: str
    slots: int
    gpus: str
    creator: str
    reason: str


def human_duration(d: timedelta) -> str:
    """A duration as kubectl writes ages ("90s", "9m30s", "125m", "26h", "3d"): Kubernetes'
    ``duration.HumanDuration``."""
    seconds = int(d.total_seconds())
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        return f"{minutes}m" if seconds % 60 == 0 else f"{minutes}m{seconds % 60}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = seconds // 3600
    if hours < 8:
        return f"{hours}h" if minutes % 60 == 0 else f"{hours}h{minutes % 60}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d" if hours % 24 == 0 else f"{hours // 24}d{hours % 24}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        years, days = hours // 24 // 365, hours // 24 % 365
        return f"{years}y" if days == 0 else f"{years}y{days}d"
    return f"{hours // 24 // 365}y"


def _gpus_of(obj: dict[str, Any]) -> str:
    """What a job's own resourcesPerNode asks of GPUs, in the words of Go's ``runtimes.GPUsOf``:
    "2" (nvidia.com/gpu), "1 amd.com/gpu" for another, "" for none."""
    res = (((obj.get("spec") or {}).get("trainer") or {}).get("resourcesPerNode")) or {}
    asked = {**(res.get("limits") or {}), **(res.get("requests") or {})}
    parts: list[str] = []
    for name in sorted(asked):
        q = str(asked[name])
        if not name.endswith("/gpu") or q in ("0", ""):
            continue
        if name == "nvidia.com/gpu":
            parts.insert(0, q)
        else:
            parts.append(f"{q} {name}")
    return ", ".join(parts)


@dataclass
class Runtime:
    """An MPI runtime: a ClusterTrainingRuntime with an MPI policy, or one of the namespace's own
    TrainingRuntimes (``namespace`` set), which jobs of that namespace may pick too."""

    name: str
    mpi_implementation: str
    description: str
    launcher_hosts_ranks: bool
    worker_image: str
    raw: dict[str, Any] = field(default_factory=dict, repr=False)
    namespace: str = ""


@dataclass
class LifecycleEvent:
    """One step of a job's life, as ``MPIJobClient.watch`` yields them.

    ``kind`` is one of submitted, queued, scheduling, running, completed,
    failed (or suspended); ``progress`` when the number of ready Workers
    changes (``message`` "Workers ready 3/4"); ``event`` for a Kubernetes
    Event about one of the job's objects (``event`` holds it). ``status`` is
    the full status at that moment.
    """

    kind: EventKind
    phase: Phase
    message: str
    status: JobStatus
    time: datetime | None
    # For kind "event": the Kubernetes Event.
    event: JobEvent | None = None


_KIND_OF_PHASE: dict[str, EventKind] = {
    "Pending": "scheduling", "GangScheduling": "scheduling", "Starting": "scheduling",
    "Queued": "queued", "Running": "running", "Succeeded": "completed", "Failed": "failed",
    "Suspended": "suspended",
}


def event_kind(phase: str) -> EventKind:
    """The lifecycle kind of a phase."""
    return _KIND_OF_PHASE.get(phase, "scheduling")


_CHILD_JOB = re.compile(r"^-(launcher|node)-\d+$")
_CHILD_POD = re.compile(r"^-(launcher|node)-\d+-\d+-[a-z0-9]{5}$")
_WORKLOAD = re.compile(r"^-[a-z0-9]{5}$")


def is_job_object(job: str, kind: str, name: str) -> bool:
    """Whether an object of ``kind`` named ``name`` belongs to MPI job ``job``, by the exact
    names Trainer, JobSet, Kueue and mpijob give (a prefix match would give job ``hello`` the
    events of ``hello-4``). Mirror of Go's ``api.IsJobObject``; both are tested with
    ``pkg/api/testdata/job-objects.json``."""
    if kind == "Workload":
        return name.startswith("trainjob-" + job) and bool(_WORKLOAD.match(name[len("trainjob-" + job):]))
    if kind in ("Job", "Pod"):
        rx = _CHILD_JOB if kind == "Job" else _CHILD_POD
        return name.startswith(job) and bool(rx.match(name[len(job):]))
    if kind == "NetworkPolicy":
        return name == job + "-mpi"
    return name == job


@dataclass
class JobEvent:
    """A Kubernetes Event about one of the job's objects (the TrainJob, its JobSet, Jobs,
    pods, Workload), as ``MPIJobClient.get_events`` and ``watch`` give them."""

    type: str  # Normal or Warning
    reason: str
    message: str
    kind: str  # the object's kind
    object: str  # the object's name
    time: datetime | None
    count: int = 1
    # It claims to come from mpijob-manager, and the manager does not vouch
    # for it in the job's status: someone who may edit the namespace wrote it.
    forged: bool = False


def event_digest(uid: str, event_type: str, reason: str, message: str) -> str:
    """Go's ``api.EventDigest``: how the job's status vouches for an Event of mpijob-manager's, bound to
    the job's UID (an Event copied from another job, or an earlier one of the name, is not vouched for)."""
    return hashlib.sha256(f"{uid}\0{event_type}\0{reason}\0{message}".encode()).hexdigest()[:16]


def claims_manager(*reporters: str) -> bool:
    """Go's ``api.ClaimsManager``: whether an Event's reporting component, source component or
    reporting instance says mpijob-manager (in any case or spacing)."""
    for who in reporters:
        words = [w for w in re.split(r"[ \-_./]+", (who or "").lower()) if w]
        if "mpijob-manager" in "-".join(words):
            return True
    return False


def forged_event(uid: str, event_type: str, reason: str, message: str, reporters: tuple[str, ...],
                 digests: list[str]) -> bool:
    """Go's ``api.ForgedEvent``, tested with the same vectors (pkg/api/testdata/event-proof.json); ``uid`` is
    the Event's involvedObject.uid."""
    return claims_manager(*reporters) and event_digest(uid, event_type, reason, message) not in digests


# Go's api.ManagerStateOf and StaleNote, tested with the same vectors
# (pkg/api/testdata/stale-status.json).
def _human(seconds: float) -> str:
    s = max(0, int(seconds))
    if s < 120:
        return f"{s}s"
    if s < 7200:
        return f"{s // 60}m"
    if s < 48 * 3600:
        return f"{s // 3600}h"
    return f"{s // 86400}d"


def manager_state(lease: dict[str, Any] | None, now: datetime) -> tuple[bool, datetime | None]:
    """(running, last renewal) from mpijob-manager's Lease spec; no Lease claims nothing."""
    if lease is None:
        return True, None
    since = _time(lease.get("renewTime")) or _time(lease.get("acquireTime"))
    if not lease.get("holderIdentity") or since is None:
        return False, since
    duration = lease.get("leaseDurationSeconds") or 15
    return (now - since).total_seconds() <= 2 * duration, since


def stale_note(running: bool, since: datetime | None, observed: datetime | None, now: datetime) -> str:
    """Why a status may no longer be current ("" while the manager runs)."""
    if running:
        return ""
    note = "mpijob-manager is not running"
    if since is not None:
        note = f"mpijob-manager is not running (its Lease was last renewed {_human((now - since).total_seconds())} ago)"
    if observed is not None:
        return note + f": this status is as it saw the job {_human((now - observed).total_seconds())} ago, and may be stale"
    return note + ": this status may be stale"
