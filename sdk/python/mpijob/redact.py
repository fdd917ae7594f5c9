"""Secrets out of logs: the same rules as ``kubectl mpijob logs``
(PEM blocks, bearer tokens, cloud keys, password=/token=/secret=/api_key= values).

>>> Redactor().line("login with password=hunter2")
'login with password=[REDACTED]'
"""

from __future__ import annotations

import json
import re
from importlib import resources

# The rules are data: this package ships pkg/logs/redact-rules.json, which
# the CLI embeds, and the tests fail when the two copies differ.
_DOC = json.loads(resources.files(__package__).joinpath("redact-rules.json").read_text(encoding="utf-8"))
MASK: str = _DOC["mask"]
_RULES = [(tuple(r["hints"]), re.compile(r["pattern"]), tuple(r.get("require", ()))) for r in _DOC["rules"]]

_CLASSES = {"upper": str.isupper, "lower": str.islower, "digit": str.isdigit}


def _has_classes(text: str, classes: tuple[str, ...]) -> bool:
    return all(any(_CLASSES[c](ch) for ch in text) for c in classes)


_PEM_MAX_LINES: int = _DOC["pemMaxLines"]


def _pem_body(text: str) -> bool:
    """Whether a line may be part of a PEM block's body: base64 (no spaces,
    whatever prefix a rank tag adds) or an encrypted key's headers."""
    t = text.strip()
    return (" " not in t and "\t" not in t) or "Proc-Type:" in t or "DEK-Info:" in t


class Redactor:
    """Masks secrets line by line; remembers PEM blocks across lines.
    ``count`` is the number of secrets hidden so far."""

    def __init__(self) -> None:
        self.count = 0
        self._in_pem = False
        self._pem_lines = 0

    def line(self, text: str) -> str:
        if self._in_pem:
            if "-----END " in text:
                self._in_pem = False
                return MASK
            # A block with no END (a truncated key) hides only what still
            # looks like its body, and at most pemMaxLines lines.
            self._pem_lines += 1
            if self._pem_lines <= _PEM_MAX_LINES and _pem_body(text):
                return MASK
            self._in_pem = False
        i = text.find("-----BEGIN ")
        if i >= 0 and ("PRIVATE KEY" in text[i:] or "CERTIFICATE" in text[i:]):
            self.count += 1
            if "-----END " not in text[i + 11:]:
                self._in_pem, self._pem_lines = True, 0
            return text[:i] + MASK
        lower = text.lower()
        for hints, rx, require in _RULES:
            if not any(h in lower for h in hints):
                continue

            def sub(m: re.Match[str], require: tuple[str, ...] = require) -> str:
                if m.group(2) == MASK or (require and not _has_classes(m.group(2), require)):
                    return m.group(0)
                self.count += 1
                return m.group(1) + MASK + m.group(3)

            text = rx.sub(sub, text)
        return text


def redact(text: str) -> tuple[str, int]:
    """Mask the secrets of a whole text; returns it and how many were hidden."""
    r = Redactor()
    out = "\n".join(r.line(line) for line in text.split("\n"))
    return out, r.count
