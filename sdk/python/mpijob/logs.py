"""Pod logs merged by time, as ``kubectl mpijob logs --all`` merges them."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime, timezone


def merge_logs(streams: Sequence[tuple[str, Sequence[str]]]) -> list[tuple[str, str]]:
    """Merge pod logs (lines that start with the kubelet's RFC 3339 time) by time; stable,
    and a line without a time stays after its stream's previous line."""
    items: list[tuple[datetime, int, int, str, str]] = []
    for i, (label, lines) in enumerate(streams):
        last = datetime.min.replace(tzinfo=timezone.utc)
        for raw in lines:
            t = parse_ts(raw.partition(" ")[0])
            if t is not None:
                last = t
            items.append((last, i, len(items), label, raw))
    items.sort(key=lambda it: (it[0], it[2]))
    return [(label, raw) for _, _, _, label, raw in items]


def parse_ts(ts: str) -> datetime | None:
    m = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)$", ts)
    if not m:
        return None
    frac = (m.group(2) or ".0")[1:7].ljust(6, "0")
    tz = "+00:00" if m.group(3) == "Z" else m.group(3)
    return datetime.fromisoformat(f"{m.group(1)}.{frac}{tz}")


def now() -> datetime:
    return datetime.now(timezone.utc)
