"""Secrets out of logs: the same rules as ``kubectl mpijob logs``
(PEM blocks, bearer tokens, cloud keys, password=/token=/secret=/api_key= values).

>>> Redactor().line("login with password=hunter2")
'login with password=[REDACTED]'
"""

from __future__ import annotations

import re

MASK = "[REDACTED]"

_RULES = [
    (("pass", "pwd", "secret", "token", "key"),
     re.compile(r"(?i)((?:password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key|private[_-]?key|client[_-]?secret)"
                r"[A-Za-z0-9_-]*[\"']?\s*[:=]\s*[\"']?)([^\s\"',;&]+)()")),
    (("bearer",), re.compile(r"(?i)(bearer\s+)([A-Za-z0-9._~+/=-]{8,})()")),
    (("akia", "gh", "hf_", "eyj"),
     re.compile(r"()\b(AKIA[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{30,}|hf_[A-Za-z0-9]{30,}"
                r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})\b()")),
    (("://",), re.compile(r"(://[^/\s:@]+:)([^@\s/]+)(@)")),
]


class Redactor:
    """Masks secrets line by line; remembers PEM blocks across lines.
    ``count`` is the number of secrets hidden so far."""

    def __init__(self) -> None:
        self.count = 0
        self._in_pem = False

    def line(self, text: str) -> str:
        if self._in_pem:
            if "-----END " in text:
                self._in_pem = False
            return MASK
        i = text.find("-----BEGIN ")
        if i >= 0 and ("PRIVATE KEY" in text[i:] or "CERTIFICATE" in text[i:]):
            self.count += 1
            if "-----END " not in text[i + 11:]:
                self._in_pem = True
            return text[:i] + MASK
        lower = text.lower()
        for hints, rx in _RULES:
            if not any(h in lower for h in hints):
                continue

            def sub(m: "re.Match[str]") -> str:
                self.count += 1
                return m.group(1) + MASK + m.group(3)

            text = rx.sub(sub, text)
        return text


def redact(text: str) -> tuple[str, int]:
    """Mask the secrets of a whole text; returns it and how many were hidden."""
    r = Redactor()
    out = "\n".join(r.line(line) for line in text.split("\n"))
    return out, r.count
