"""Where a running job's ranks are: the collector that runs in each of its pods
(``stacks-collect.sh``, pkg/stacks/collect.sh shipped as is), what it prints read
back, one stack per rank, and identical stacks grouped into the lines every
interface shows (``ranks 0-6 (7): comm.Allreduce ← train.py:120 step()``).
The same rules as Go's pkg/stacks, checked by the shared vectors
(pkg/stacks/testdata/vectors.json)."""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from .logs import worker_index

SCRIPT = resources.files(__package__).joinpath("stacks-collect.sh").read_text(encoding="utf-8")
"""The collector, run with ``sh -c`` in a pod's node container."""


@dataclass
class Frame:
    """One Python frame; ``source`` is its line of code as the pod has the file."""

    file: str
    line: int
    func: str
    source: str = ""

    def __str__(self) -> str:
        if self.func.startswith("<"):
            return f"{posixpath.basename(self.file)}:{self.line} {self.func}"
        return f"{posixpath.basename(self.file)}:{self.line} {self.func}()"


@dataclass
class Thread:
    frames: list[Frame] = field(default_factory=list)
    current: bool = False


@dataclass
class Process:
    """One MPI rank's process as the collector saw it; ``hook`` says it ran mpijob's
    stack hook and dumped its threads."""

    pid: int
    ppid: int
    rank: int
    state: str
    cpu_ticks: int
    hook: bool
    comm: str
    threads: list[Thread] = field(default_factory=list)


@dataclass
class Pod:
    """A pod the collector ran in; ``worker`` is -1 for the Launcher."""

    name: str
    worker: int
    node: str = ""

    def where(self) -> str:
        return "the Launcher" if self.worker < 0 else f"Worker {self.worker}"


@dataclass
class Rank:
    """One rank's stack: its main thread's frames, innermost first, and the process's state."""

    rank: int
    pod: Pod
    state: str
    hook: bool
    comm: str
    frames: list[Frame] = field(default_factory=list)
    threads: int = 0


@dataclass
class Group:
    """Ranks with the same stack: ``headline`` says it in a line, ``callee`` is the call
    the innermost frame makes, ``where`` that frame."""

    ranks: list[int]
    rank_text: str
    headline: str
    states: str
    pods: str
    callee: str = ""
    where: str = ""
    frames: list[Frame] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)


@dataclass
class Stacks:
    """What :meth:`mpijob.MPIJobClient.get_stacks` found: every rank, the groups (largest
    first), the sentence that contrasts them, and the pods that did not answer."""

    ranks: list[Rank]
    groups: list[Group]
    contrast: str = ""
    failed: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        out: list[str] = []
        for i, g in enumerate(self.groups):
            if i:
                out.append("")
            out.append(g.headline)
            width = max((len(str(f)) for f in g.frames), default=0)
            out.extend(f"    {str(f).ljust(width)}  {f.source}".rstrip() for f in g.frames)
            where = g.pods + (f" (node {', '.join(g.nodes)})" if g.nodes else "")
            out.append(f"    {g.states}, on {where}")
        if self.contrast:
            out += ["", self.contrast[:1].upper() + self.contrast[1:] + "."]
        return "\n".join(out)


_PROCESS = re.compile(r"^@@process pid=(\d+) ppid=(\d+) rank=(\d+) state=(\S+) cpu_ticks=(\d+) hook=([01]) comm=(.*)$")
_THREAD = re.compile(r"^(Current thread|Thread) 0x[0-9a-f]+ \(most recent call first\):$")
_FRAME = re.compile(r'^  File "(.*)", line (\d+) in (.*)$')
_SOURCE = re.compile(r"^@@source (.*):(\d+)\t(.*)$")


def parse(out: str) -> list[Process]:
    """The collector's output read back; lines it does not know are skipped."""
    procs: list[Process] = []
    cur: Process | None = None
    sources: dict[str, str] = {}

    def finish() -> None:
        nonlocal cur, sources
        if cur is None:
            return
        for t in cur.threads:
            for f in t.frames:
                f.source = sources.get(f"{f.file}:{f.line}", "")
        procs.append(cur)
        cur, sources = None, {}

    for line in out.split("\n"):
        line = line.rstrip("\r")
        m = _PROCESS.match(line)
        if m:
            finish()
            cur = Process(pid=int(m[1]), ppid=int(m[2]), rank=int(m[3]), state=m[4], cpu_ticks=int(m[5]),
                          hook=m[6] == "1", comm=m[7])
            continue
        if cur is None:
            continue
        if line == "@@end":
            finish()
        elif _THREAD.match(line):
            cur.threads.append(Thread(current=line.startswith("Current")))
        elif m := _FRAME.match(line):
            if not cur.threads:
                cur.threads.append(Thread())
            cur.threads[-1].frames.append(Frame(file=m[1], line=int(m[2]), func=m[3]))
        elif m := _SOURCE.match(line):
            sources[f"{m[1]}:{m[2]}"] = m[3]
    finish()
    return procs


STATE_WORDS = {"R": "running", "S": "sleeping", "D": "waiting on disk", "T": "stopped", "t": "stopped",
               "Z": "exited", "I": "idle"}


def _outermost(ps: list[Process], hooked: bool) -> Process | None:
    pids = {p.pid for p in ps if not hooked or p.hook}
    best: Process | None = None
    for p in ps:
        if hooked and not p.hook:
            continue
        if p.ppid not in pids and (best is None or p.pid < best.pid):
            best = p
    return best


def _main_thread(threads: list[Thread]) -> list[Frame]:
    for t in threads:
        if t.frames and t.frames[-1].func == "<module>":
            return t.frames
    for t in threads:
        if t.current:
            return t.frames
    return threads[0].frames if threads else []


def ranks_of(pod: Pod, procs: list[Process]) -> list[Rank]:
    """One :class:`Rank` per rank of a pod's processes: for a rank with several, the
    outermost with the hook, else the outermost."""
    by_rank: dict[int, list[Process]] = {}
    for p in procs:
        by_rank.setdefault(p.rank, []).append(p)
    out = []
    for r, ps in by_rank.items():
        pick = _outermost(ps, True) or _outermost(ps, False)
        assert pick is not None
        out.append(Rank(rank=r, pod=pod, state=STATE_WORDS.get(pick.state, pick.state), hook=pick.hook, comm=pick.comm,
                        frames=_main_thread(pick.threads) if pick.hook else [], threads=len(pick.threads)))
    return sorted(out, key=lambda r: r.rank)


_CALL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*\s*\(")
_NOT_CALLEES = {"if", "elif", "while", "for", "return", "and", "or", "not", "in", "is", "lambda", "yield", "await",
                "assert", "del", "with", "print", "float", "int", "str", "bool", "len", "list", "tuple", "dict", "set",
                "sum", "max", "min", "abs", "round", "repr", "sorted"}


def callee(source: str) -> str:
    """The call a line of Python makes, as written: the first dotted name before a "("
    that is not a keyword or a wrapping builtin (``comm.allreduce`` in
    ``loss = float(comm.allreduce(x))``); "" when there is none."""
    for m in _CALL.finditer(source):
        name = m.group(0)[:-1].strip()
        if name not in _NOT_CALLEES:
            return name
    return ""


def rank_text(ranks: list[int]) -> str:
    """Sorted ranks as a selection: "0-6", "0,2,5-7"."""
    parts, i = [], 0
    while i < len(ranks):
        j = i
        while j + 1 < len(ranks) and ranks[j + 1] == ranks[j] + 1:
            j += 1
        parts.append(str(ranks[i]) if i == j else f"{ranks[i]}-{ranks[j]}")
        i = j + 1
    return ",".join(parts)


def _pods_text(workers: set[int]) -> str:
    idx = sorted(w for w in workers if w >= 0)
    parts = ["the Launcher"] if any(w < 0 for w in workers) else []
    if len(idx) == 1:
        parts.append(f"Worker {idx[0]}")
    elif idx:
        parts.append("Workers " + rank_text(idx))
    return " and ".join(parts)


def _count_words(counts: dict[str, int]) -> str:
    if len(counts) == 1:
        return next(iter(counts))
    return ", ".join(f"{w} {n}" for w, n in sorted(counts.items(), key=lambda x: (-x[1], x[0])))


def _key(r: Rank) -> str:
    if not r.hook or not r.frames:
        return f"\0{r.comm}\0{r.hook}"
    return "".join(f"{f.file}:{f.line}:{f.func}\n" for f in r.frames)


def group(ranks: list[Rank]) -> list[Group]:
    """Ranks with identical stacks grouped, the largest group first (then by lowest rank)."""
    by_key: dict[str, list[Rank]] = {}
    for r in ranks:
        by_key.setdefault(_key(r), []).append(r)
    out = []
    for rs in by_key.values():
        rs.sort(key=lambda r: r.rank)
        states: dict[str, int] = {}
        for r in rs:
            states[r.state] = states.get(r.state, 0) + 1
        g = Group(ranks=[r.rank for r in rs], rank_text=rank_text([r.rank for r in rs]), headline="",
                  states=_count_words(states), pods=_pods_text({r.pod.worker for r in rs}), frames=rs[0].frames,
                  nodes=sorted({r.pod.node for r in rs if r.pod.node}))
        if g.frames:
            g.where = str(g.frames[0])
            g.callee = callee(g.frames[0].source)
            what = f"{g.callee} ← {g.where}" if g.callee else g.where
            if len(g.frames) > 1:
                what += f" ← {g.frames[1]}"
        elif rs[0].hook:
            what = f"no Python frames ({rs[0].comm}, {g.states})"
        else:
            what = f"no Python stack: {rs[0].comm} runs without mpijob's stack hook ({g.states})"
        if len(rs) == 1:
            g.headline = f"rank {rs[0].rank} on {rs[0].pod.where()}: {what}"
        else:
            g.headline = f"ranks {g.rank_text} ({len(rs)}): {what}"
        out.append(g)
    out.sort(key=lambda g: (-len(g.ranks), g.ranks[0]))
    return out


def _ranks_wait(g: Group) -> str:
    one = len(g.ranks) == 1
    who = ("rank " if one else "ranks ") + g.rank_text
    where = g.callee or g.where
    if not where:
        return f"{who} {'has' if one else 'have'} no Python stack"
    return f"{who} {'waits' if one else 'wait'} in {where}"


def contrast(groups: list[Group]) -> str:
    """How the groups differ in a sentence, the largest last: "rank 7 waits in comm.recv
    while ranks 0-6 wait in comm.Allreduce"; "" for one group or none."""
    if len(groups) < 2:
        return ""
    return ", ".join(_ranks_wait(g) for g in groups[1:]) + " while " + _ranks_wait(groups[0])


def pods_of(launchers: list[Any], workers: list[Any]) -> list[Pod]:
    """The running pods of a job's Launcher and Workers (Kubernetes client objects)."""
    out = []
    for p in launchers:
        if p.status.phase == "Running":
            out.append(Pod(name=p.metadata.name, worker=-1, node=p.spec.node_name or ""))
            break
    for p in workers:
        idx = worker_index(p)  # the rule every interface reads the index by (Go's jobpods.Index)
        if p.status.phase == "Running" and idx is not None:
            out.append(Pod(name=p.metadata.name, worker=idx, node=p.spec.node_name or ""))
    return out
