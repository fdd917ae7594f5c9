"""Did you mean ...? The known name closest to a mistyped one (mirror of Go's
``pkg/suggest``; both are tested with ``pkg/suggest/testdata/vectors.json``)."""

from __future__ import annotations

from collections.abc import Sequence


def _distance(a: str, b: str) -> int:
    """Levenshtein edit distance."""
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def closest(name: str, candidates: Sequence[str]) -> str:
    """The candidate nearest to ``name`` (case-insensitive), or "" when none is close enough
    to be a likely typo: at most max(2, len(name) // 3) edits; the first of equals wins."""
    best, best_d = "", 1 << 30
    for c in candidates:
        d = _distance(name.lower(), c.lower())
        if d < best_d:
            best, best_d = c, d
    return best if best and best_d <= max(2, len(name) // 3) else ""
