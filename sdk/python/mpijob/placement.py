"""Whether the cluster can place a job now, as mpijob's admission says it at a server dry run
(``create_job(..., dry_run=True)``): warnings that start with :data:`PREFIX` (Go's
``placement.Prefix``)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

#: What every placement warning starts with.
PREFIX = "Placement: "

# One RFC 7234 warning value as the API server writes it: code, agent, quoted text with \" and
# \\ escaped. Several Warning headers arrive joined by ", ".
_WARNING = re.compile(r'(\d{3}) \S+ "((?:[^"\\]|\\.)*)"')
_ESCAPE = re.compile(r"\\(.)")


def warnings_of(headers: Mapping[str, Any] | None) -> list[str]:
    """The texts of the Warning headers of an API response, in order."""
    if not headers:
        return []
    values: list[str] = []
    getlist = getattr(headers, "getlist", None)
    if callable(getlist):
        values = [str(v) for v in getlist("Warning")]
    else:
        v = headers.get("Warning") or headers.get("warning")
        values = [str(v)] if v else []
    out: list[str] = []
    for v in values:
        out.extend(_ESCAPE.sub(r"\1", m.group(2)) for m in _WARNING.finditer(v) if m.group(1) == "299")
    return out


def placement_lines(warnings: list[str]) -> list[str]:
    """The placement lines among an answer's warnings, without the prefix."""
    return [w[len(PREFIX):] for w in warnings if w.startswith(PREFIX)]
