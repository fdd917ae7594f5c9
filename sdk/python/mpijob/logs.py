"""Pod logs merged by time, as ``kubectl mpijob logs --all`` merges them."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from .constants import COMPLETION_INDEX, REPLICATED_JOB


def log_from(role: str, *, pod_live: bool, launcher_live: bool, finished: bool, store: bool, store_only: bool) -> str:
    """Where a Launcher's or Worker's log is read: ``"pod"``, ``"store"`` or ``"none"``.

    The rule the CLI and the dashboard follow too (Go's ``jobview.LogFrom``, tested with the same
    vectors, ``pkg/jobview/testdata/log-sources.json``): the pod while the job has it; else the log
    store for a job that ran, that is one that finished, or a Worker gone while its Launcher runs.
    """
    if pod_live and not store_only:
        return "pod"
    if not store:
        return "none"
    if finished or store_only or (role == "worker" and launcher_live):
        return "store"
    return "none"


#: The most of one pod's log a read takes (Go's ``jobpods.MaxLogBytes``): the guard of the reader,
#: not of the log, which the kubelet's rotation keeps well below it.
MAX_LOG_BYTES = 100 << 20

#: The container of the Launcher and Workers that runs the program (Go's ``api.NodeContainer``).
NODE_CONTAINER = "node"

_INDEX = re.compile(r"0|[1-9][0-9]*")


def pod_log_options(*, tail_lines: int | None = None, since_seconds: int | None = None, follow: bool = False) -> dict[str, Any]:
    """The options of every read of a pod's live log, as the keyword arguments of the Kubernetes
    client's ``read_namespaced_pod_log``: the node container by name (a pod with a sidecar has more
    than one), the kubelet's timestamps and one byte limit. The CLI and the dashboard send the same
    (Go's ``jobpods.LogOptions``, vectors ``pkg/jobpods/testdata/log-options.json``)."""
    out: dict[str, Any] = {"container": NODE_CONTAINER, "timestamps": True, "limit_bytes": MAX_LOG_BYTES}
    if tail_lines is not None and tail_lines >= 0:
        out["tail_lines"] = tail_lines
    if since_seconds:
        out["since_seconds"] = since_seconds
    if follow:
        out["follow"] = True
    return out


def worker_index(pod: Any) -> int | None:
    """A Worker pod's index, from its indexed Job's label (None: none readable)."""
    value = ((pod.metadata.labels or {}).get(COMPLETION_INDEX)) or ""
    return int(value) if _INDEX.fullmatch(value) else None


def split_pods(pods: Sequence[Any]) -> tuple[list[Any], list[Any]]:
    """A job's Launcher pods (newest first, then by name) and Worker pods (by index as a number, a
    pod with no readable index last, then by name); other pods are left out. Every interface sorts
    them so (Go's ``jobpods.Split``, vectors ``pkg/jobpods/testdata/job-pods.json``)."""
    def role(p: Any) -> str:
        return str((p.metadata.labels or {}).get(REPLICATED_JOB, ""))

    def created(p: Any) -> float:
        t = p.metadata.creation_timestamp
        return t.timestamp() if t is not None else 0.0

    launchers = sorted((p for p in pods if role(p) == "launcher"), key=lambda p: p.metadata.name)
    launchers.sort(key=created, reverse=True)

    def worker_key(p: Any) -> tuple[int, int, str]:
        i = worker_index(p)
        return (0, i, p.metadata.name) if i is not None else (1, 0, p.metadata.name)

    workers = sorted((p for p in pods if role(p) == "node"), key=worker_key)
    return launchers, workers


@dataclass
class LogRead:
    """One log of a plan: whose (``label`` launcher or worker-N, ``role``, ``index``, -1 for the
    Launcher) and where it is read (``source``: "pod" or "store")."""

    label: str
    role: str
    index: int
    source: str


@dataclass
class LogPlan:
    """The logs a request reads, in the order shown, and the job's Workers (pods beyond its spec
    counted); ``missing`` says why nothing is read (Go's jobview.Missing* words)."""

    reads: list[LogRead] = field(default_factory=list)
    workers: int = 0
    missing: str = ""


_WORKER_TARGET = re.compile(r"worker-(0|[1-9][0-9]*)")


def plan_logs(target: str, *, workers: int, launcher_live: bool, live_workers: Sequence[int], finished: bool,
              store: bool, store_only: bool = False) -> LogPlan:
    """Which logs a request reads and where each one comes from: ``target`` is "launcher" (or
    ""), "worker-N" or "all". The plan the CLI and the dashboard execute too (Go's
    ``jobview.PlanLogs``, tested with the same vectors, ``pkg/jobview/testdata/log-plans.json``)."""
    live = set(live_workers)
    plan = LogPlan(workers=max([workers] + [i + 1 for i in live]))

    def read(role: str, index: int) -> LogRead | None:
        pod_live = launcher_live if role == "launcher" else index in live
        src = log_from(role, pod_live=pod_live, launcher_live=launcher_live, finished=finished, store=store, store_only=store_only)
        if src == "none":
            return None
        return LogRead("launcher" if role == "launcher" else f"worker-{index}", role, index, src)

    if target in ("", "launcher"):
        r = read("launcher", -1)
        if r is None:
            plan.missing = "no-launcher-log"
        else:
            plan.reads = [r]
    elif target == "all":
        plan.reads = [r for r in [read("launcher", -1)] + [read("worker", i) for i in range(plan.workers)] if r is not None]
        if not plan.reads:
            plan.missing = "no-logs"
    else:
        m = _WORKER_TARGET.fullmatch(target)
        if m is None:
            plan.missing = "bad-target"
        elif int(m.group(1)) >= plan.workers:
            plan.missing = "worker-out-of-range"
        else:
            r = read("worker", int(m.group(1)))
            if r is None:
                plan.missing = "no-worker-log"
            else:
                plan.reads = [r]
    return plan


def merge_logs(streams: Sequence[tuple[str, Sequence[str]]]) -> list[tuple[str, str]]:
    """Merge pod logs (lines that start with the kubelet's RFC 3339 time) by time, to the
    nanosecond; stable, and a line without a time stays after its stream's previous line.
    Mirror of Go's ``logs.Merge``; both are tested with ``pkg/logs/testdata/merge-vectors.json``."""
    items: list[tuple[int, int, str, str]] = []
    for label, lines in streams:
        last = _BEFORE_ALL
        for raw in lines:
            ns = _ns(raw.partition(" ")[0])
            if ns is not None:
                last = ns
            items.append((last, len(items), label, raw))
    items.sort(key=lambda it: (it[0], it[1]))
    return [(label, raw) for _, _, label, raw in items]


_TS = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)$")
_BEFORE_ALL = -(1 << 62)


def _ns(ts: str) -> int | None:
    """Nanoseconds since the epoch of a kubelet timestamp, or None."""
    m = _TS.match(ts)
    if not m:
        return None
    tz = "+00:00" if m.group(3) == "Z" else m.group(3)
    try:
        whole = datetime.fromisoformat(f"{m.group(1)}{tz}")
    except ValueError:
        return None
    frac = (m.group(2) or ".")[1:10].ljust(9, "0")
    return int(whole.timestamp()) * 1_000_000_000 + int(frac)


def parse_ts(ts: str) -> datetime | None:
    """The time of a kubelet timestamp (to the microsecond), or None."""
    m = _TS.match(ts)
    if not m:
        return None
    frac = (m.group(2) or ".0")[1:7].ljust(6, "0")
    tz = "+00:00" if m.group(3) == "Z" else m.group(3)
    try:
        return datetime.fromisoformat(f"{m.group(1)}.{frac}{tz}")
    except ValueError:
        return None


def now() -> datetime:
    return datetime.now(timezone.utc)


# The tag mpirun puts before each line of a rank's output (OpenMPI 4.1's orte_tag_output):
# [JOBID,RANK]<stdout>:TEXT. Same rule as pkg/logs (pkg/logs/testdata/rank-vectors.json).
_RANK_TAG = re.compile(r"^\[\d+,(\d+)\]<(stdout|stderr|stddiag|stdio)>:")
MAX_SELECTION = 65536
_SELECTION_HELP = "give a rank number, a range like 0-3, or a list like 0,2,5-7"


def split_rank(text: str) -> tuple[int, str, str] | None:
    """``(rank, stream, message)`` of a tagged line (time already cut), else None."""
    m = _RANK_TAG.match(text)
    if m is None:
        return None
    return int(m.group(1)), m.group(2), text[m.end():]


def parse_selection(spec: str) -> set[int]:
    """A rank selection: ``3``, ``0-3``, ``0,2,5-7``; ValueError says what is wrong."""
    if not spec.strip():
        raise ValueError(_SELECTION_HELP)
    out: set[int] = set()
    for part in spec.split(","):
        part = part.strip()
        lo, dash, hi = part.partition("-")
        if not lo.isdigit() or (dash and not hi.isdigit()):
            raise ValueError(f"{part}: {_SELECTION_HELP}")
        a = int(lo)
        b = int(hi) if dash else a
        if b < a:
            raise ValueError(f"{part}: a range goes from low to high, e.g. {b}-{a}")
        if b - a + 1 + len(out) > MAX_SELECTION:
            raise ValueError(f"{part}: at most {MAX_SELECTION} ranks in a selection")
        out.update(range(a, b + 1))
    return out

