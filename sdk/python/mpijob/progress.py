"""Training progress: the line a rank prints, and reading it back.

A training script reports progress with one line per report, from any rank
(rank 0 is enough)::

    from mpijob.progress import report
    report(epoch=3, total_epochs=20, loss=0.31, accuracy=0.90, eta_seconds=120)
    # prints: MPIJOB_PROGRESS {"epoch": 3, "total_epochs": 20, "loss": 0.31, ...}

The format is documented (docs/progress.md) so any language can print it:
the prefix ``MPIJOB_PROGRESS`` and a JSON object with ``epoch`` or ``step``,
optionally ``total_epochs``, ``total_steps``, ``loss``, ``accuracy``,
``eta_seconds`` and other numbers under ``metrics``. mpijob-manager reads
the last one from the Launcher's log and publishes it on the TrainJob
(annotation ``trainer.opendatahub.io/trainerStatus``, OpenShift AI's format);
``MPIJobClient.get_job`` returns it as ``status.progress`` and
``MPIJobClient.get_progress`` every report so far.

Shared with Go (``pkg/progress``): ``pkg/progress/testdata/vectors.json``.
"""

from __future__ import annotations

import json
import math
import re
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import IO, Any

PREFIX = "MPIJOB_PROGRESS "
ANNOTATION = "trainer.opendatahub.io/trainerStatus"
FIELDS = ("epoch", "total_epochs", "step", "total_steps", "loss", "accuracy", "eta_seconds", "rank_step_seconds")


def format_report(**fields: Any) -> str:
    """The progress line for ``fields``; names outside :data:`FIELDS` go under ``metrics``, but
    ``resumed`` (a dict: ``epoch``, ``step``, ``age_seconds``, ``from``; see
    :func:`mpijob.checkpoint.resumed_report`), which says where a run took up again."""
    rep: dict[str, Any] = {}
    metrics: dict[str, Any] = {}
    for k, v in fields.items():
        if v is None:
            continue
        if isinstance(v, float) and not math.isfinite(v):
            v = str(v)  # JSON has no NaN: the reader leaves it out
        (rep if k in FIELDS or k == "resumed" else metrics)[k] = v
    if "epoch" not in rep and "step" not in rep:
        raise ValueError("a progress report needs epoch= or step=")
    if metrics:
        rep["metrics"] = metrics
    return PREFIX + json.dumps(rep, separators=(", ", ": "))


def report(out: IO[str] | None = None, **fields: Any) -> str:
    """Print one progress report (flushed at once) and return the line."""
    line = format_report(**fields)
    stream = out or sys.stdout
    print(line, file=stream, flush=True)
    return line


@dataclass
class Report:
    """One progress report, as read from a log (``time``: when it was logged, if known)."""

    epoch: float | None = None
    total_epochs: float | None = None
    step: float | None = None
    total_steps: float | None = None
    loss: float | None = None
    accuracy: float | None = None
    eta_seconds: float | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    time: datetime | None = None
    #: Where the program took up again from a checkpoint (Go's ``progress.Resumed``): ``epoch``,
    #: ``step``, ``age_seconds`` and ``from`` (another job's checkpoint), or None.
    resumed: dict[str, Any] | None = None
    #: Each rank's mean seconds computing one step since the last report (not the wait for the
    #: others), indexed by rank: rank 0 gathers them (:class:`StepTimes`); None when not reported.
    rank_step_seconds: list[float] | None = None

    @property
    def percent(self) -> int | None:
        """How far, by steps when there are totals of them, else by epochs."""
        if self.step is not None and self.total_steps:
            done, total = self.step, self.total_steps
        elif self.epoch is not None and self.total_epochs:
            done, total = self.epoch, self.total_epochs
        else:
            return None
        return max(0, min(100, math.floor(100 * done / total)))


# Go: progress.MaxCount, MaxMetrics, MaxMetricNameLength, MetricName (shared vectors in pkg/progress/testdata).
MAX_COUNT = 1e12
MAX_METRICS = 32
MAX_METRIC_NAME_LENGTH = 64
_METRIC_NAME = re.compile(r"[A-Za-z0-9_.:/-]{1,64}")  # 64: MAX_METRIC_NAME_LENGTH
_INT32_MAX = 2**31 - 1


def metric_name(name: str) -> bool:
    """Whether ``name`` may be a metric's name: letters, digits and ``_ . : / -`` only, at most 64, so no escape
    code, control or direction character reaches a terminal or a page."""
    return isinstance(name, str) and _METRIC_NAME.fullmatch(name) is not None


def _num(v: Any, lo: float = -math.inf, hi: float = math.inf) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    try:
        f = float(v)
    except OverflowError:
        return None
    return f if math.isfinite(f) and lo <= f <= hi else None


def _metrics(m: Any) -> dict[str, float]:
    if not isinstance(m, dict):
        return {}
    names = sorted(k for k, v in m.items() if metric_name(k) and _num(v) is not None)
    return {k: float(m[k]) for k in names[:MAX_METRICS]}


def parse(line: str) -> Report | None:
    """The report on one log line, or None (a line that does not decode is not one)."""
    line = line.rstrip("\r\n")
    i = line.find(PREFIX)
    if i < 0:
        return None
    try:
        raw = json.loads(line[i + len(PREFIX):].strip())
    except ValueError:
        return None
    if not isinstance(raw, dict):
        return None
    # Numbers out of range are left out, not wrapped into nonsense where they are shown (Go's progress.Parse).
    r = Report(epoch=_num(raw.get("epoch"), 0, MAX_COUNT), total_epochs=_num(raw.get("total_epochs"), 0, MAX_COUNT),
               step=_num(raw.get("step"), 0, MAX_COUNT), total_steps=_num(raw.get("total_steps"), 0, MAX_COUNT),
               loss=_num(raw.get("loss")), accuracy=_num(raw.get("accuracy")),
               eta_seconds=_num(raw.get("eta_seconds"), 0, _INT32_MAX))
    if "metrics" in raw:
        r.metrics = _metrics(raw.get("metrics"))
    if isinstance(raw.get("resumed"), dict):
        r.resumed = _resumed(raw["resumed"])
    r.rank_step_seconds = _step_seconds(raw.get("rank_step_seconds"))
    if r.epoch is None and r.step is None:
        return None
    return r


MAX_FROM_LENGTH = 512
# Go: progress.MaxRanks, MaxStepSeconds.
MAX_RANKS = 65536
MAX_STEP_SECONDS = 1e6


def _step_seconds(v: Any) -> list[float] | None:
    """Mirror of Go's ``stepSeconds``: at most MAX_RANKS numbers in [0, MAX_STEP_SECONDS], else none."""
    if not isinstance(v, list) or not v or len(v) > MAX_RANKS:
        return None
    out = [_num(x, 0, MAX_STEP_SECONDS) for x in v]
    return None if any(x is None for x in out) else [float(x) for x in out if x is not None]


class StepTimes:
    """This rank's time computing its steps, not counting the wait for the other ranks in a
    collective; at each report, every rank's mean to rank 0 for ``rank_step_seconds``::

        times = StepTimes()
        for batch in batches:
            with times:
                loss = forward_backward(batch)   # this rank's own work
            allreduce_gradients()                # waiting for the others: not counted
        every = times.gather(comm)               # a collective: every rank calls it
        if rank == 0:
            report(epoch=epoch, rank_step_seconds=every)

    ``kubectl mpijob top`` shows the median and the slowest, and mpijob-manager names a rank
    that stays slower than the others (``SlowRank``)."""

    def __init__(self) -> None:
        self.seconds, self.steps, self._t = 0.0, 0, 0.0

    def __enter__(self) -> StepTimes:
        self._t = time.monotonic()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds += time.monotonic() - self._t
        self.steps += 1

    def mean(self) -> float:
        """This rank's mean seconds per step since the last gather (0 without a step)."""
        return round(self.seconds / self.steps, 6) if self.steps else 0.0

    def gather(self, comm: Any) -> list[float] | None:
        """Every rank's mean to rank 0 (mpi4py's ``comm.gather``; a list there, None elsewhere),
        and a fresh start for the next report."""
        mine = self.mean()
        self.seconds, self.steps = 0.0, 0
        return comm.gather(mine, root=0)  # type: ignore[no-any-return]


def _resumed(m: dict[str, Any]) -> dict[str, Any] | None:
    """Mirror of Go's ``resumedOf``."""
    epoch = _num(m.get("epoch"), 0, MAX_COUNT)
    if epoch is None:
        return None
    out: dict[str, Any] = {"epoch": epoch}
    step = _num(m.get("step"), 0, MAX_COUNT)
    if step:
        out["step"] = step
    age = _num(m.get("age_seconds"), 0, _INT32_MAX)
    if age:
        out["age_seconds"] = age
    f = m.get("from")
    if isinstance(f, str) and f and len(f) <= MAX_FROM_LENGTH and all(" " < c <= "~" for c in f):
        out["from"] = f
    return out


def parse_log(log: str) -> list[Report]:
    """Every report of a log, in order; lines may start with an RFC 3339 timestamp."""
    out = []
    for line in log.splitlines():
        if PREFIX not in line:
            continue
        when = None
        head, _, rest = line.partition(" ")
        if head[:4].isdigit() and "T" in head:
            try:
                when = datetime.fromisoformat(head.replace("Z", "+00:00"))
                line = rest
            except ValueError:
                pass
        r = parse(line)
        if r is not None:
            r.time = when
            out.append(r)
    return out


@dataclass
class Progress:
    """A job's last progress as mpijob-manager published it (OpenShift AI's trainerStatus)."""

    percent: int | None = None
    epoch: float | None = None
    total_epochs: int | None = None
    step: int | None = None
    total_steps: int | None = None
    eta_seconds: int | None = None
    eta: str = ""
    metrics: dict[str, float] = field(default_factory=dict)
    updated: str = ""

    @classmethod
    def from_annotations(cls, annotations: dict[str, str] | None) -> Progress | None:
        raw = (annotations or {}).get(ANNOTATION)
        if not raw:
            return None
        try:
            s = json.loads(raw)
        except ValueError:
            return None
        if not isinstance(s, dict):
            return None
        return cls(percent=s.get("progressPercentage"), epoch=s.get("currentEpoch"), total_epochs=s.get("totalEpochs"),
                   step=s.get("currentStep"), total_steps=s.get("totalSteps"), eta_seconds=s.get("estimatedRemainingSeconds"),
                   eta=s.get("estimatedRemainingTimeSummary") or "", metrics=_metrics(s.get("trainMetrics")),
                   updated=s.get("lastUpdatedTime") or "")

    @classmethod
    def from_trainer_status(cls, status: Any) -> Progress | None:
        """Trainer's own ``status.trainerStatus`` (a job that reports to Trainer's runtime status server) as
        progress, within the bounds of a report from a log (Go: ``progress.FromTrainer``; shared vectors in
        ``pkg/progress/testdata/trainer-status.json``)."""
        if not isinstance(status, dict):
            return None
        pct, eta = status.get("progressPercentage"), status.get("estimatedRemainingSeconds")
        values: dict[str, float] = {}
        for m in status.get("metrics") or []:
            name, value = (m.get("name"), m.get("value")) if isinstance(m, dict) else (None, None)
            if not isinstance(name, str) or not isinstance(value, str):
                continue
            try:
                v = float(value)
            except ValueError:
                continue
            if math.isfinite(v):  # an earlier finite value of the name is kept
                values[name] = v
        metrics = _metrics(values)
        if not (isinstance(pct, int) and not isinstance(pct, bool) and 0 <= pct <= 100):
            pct = None
        if not (isinstance(eta, int) and not isinstance(eta, bool) and 0 <= eta <= _INT32_MAX):
            eta = None
        if pct is None and eta is None and not metrics:
            return None  # nothing usable is left: no progress, as no report at all
        return cls(percent=pct, eta_seconds=eta, eta="" if eta is None else _summary(eta),
                   metrics=metrics,
                   updated=status.get("lastUpdatedTime") or "")

    @classmethod
    def of_job(cls, obj: dict[str, Any]) -> Progress | None:
        """A TrainJob's progress: mpijob's report from the Launcher's log (the annotation), else Trainer's
        ``status.trainerStatus`` (Go: ``progress.Of``)."""
        p = cls.from_annotations((obj.get("metadata") or {}).get("annotations"))
        if p is not None:
            return p
        return cls.from_trainer_status((obj.get("status") or {}).get("trainerStatus"))

    def __str__(self) -> str:
        parts = []
        if self.percent is not None:
            parts.append(f"{self.percent}%")
        if self.step is not None and self.total_steps is not None:
            parts.append(f"step {self.step}/{self.total_steps}")
        elif self.epoch is not None and self.total_epochs is not None:
            parts.append(f"epoch {_epoch(self.epoch)}/{self.total_epochs}")
        elif self.epoch is not None:
            parts.append(f"epoch {_epoch(self.epoch)}")
        elif self.step is not None:
            parts.append(f"step {self.step}")
        return " ".join(parts)

    def line(self) -> str:
        """The progress in the one line a job page shows (Go: ``jobview.Detail.ProgressLine``):
        ``45% epoch 9/20, about 1 hour 2 minutes left``."""
        out = str(self)
        if self.eta and self.eta != "complete":
            out += f", about {self.eta} left"
        return out

    def metric_lines(self) -> list[str]:
        """The training metrics as a job page lists them (Go: ``jobview.Detail.Metrics``): loss first,
        then accuracy, then the others by name, each to 4 significant digits (``loss 0.1235``)."""
        order = {"loss": 0, "accuracy": 1}
        names = sorted(self.metrics, key=lambda k: (order.get(k, 2), k))
        return [f"{k} {self.metrics[k]:.4g}" for k in names]


def _epoch(e: float) -> str:
    """An epoch as Go's PROGRESS column writes it: "3", "2.50"."""
    return str(int(e)) if float(e).is_integer() else f"{e:.2f}"


def _summary(seconds: int) -> str:
    """A time left as OpenShift AI says it (Go: ``progress.Summary``): "1 hour 1 minute", "5 minutes"."""
    if seconds <= 0:
        return "complete"
    h, m, sec = seconds // 3600, seconds // 60 % 60, seconds % 60

    def unit(n: int, name: str) -> str:
        return f"1 {name}" if n == 1 else f"{n} {name}s"

    if h and m:
        return f"{unit(h, 'hour')} {unit(m, 'minute')}"
    if h:
        return unit(h, "hour")
    if m:
        return unit(m, "minute")
    return unit(sec, "second")
