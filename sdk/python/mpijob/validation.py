"""Checks of the SDK's arguments, made before any API call: each error names the
argument, the value and the fix (``InvalidJobError.field``)."""

from __future__ import annotations

import re
import warnings
from datetime import timedelta
from typing import Any

from . import jobspec as _jobspec
from .constants import MAX_NAME
from .errors import InvalidJobError
from .redact import Redactor

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


def check_name(name: Any) -> None:
    if not isinstance(name, str) or not _NAME.match(name) or len(name) > MAX_NAME:
        raise InvalidJobError(
            f"name {name!r}: use at most {MAX_NAME} lower-case letters, digits and '-', starting and ending "
            "with a letter or digit", field="name")


def check_command(command: Any, *, runtimes: bool = True) -> None:
    """A job's command: a non-empty list of strings, or None for the runtime's (where
    ``runtimes``; a clone's new command is never None)."""
    if (command is not None or not runtimes) and (isinstance(command, str) or not command or not all(isinstance(c, str) for c in command)):
        raise InvalidJobError(f"command {command!r}: give a non-empty list of strings, e.g. ['mpirun', 'python3', 'train.py']", field="command")


def check_image(field: str, v: Any, *, runtimes: bool = True) -> None:
    """An image setting: an image reference, or None for the runtime's (where ``runtimes``)."""
    if (v is not None or not runtimes) and (not isinstance(v, str) or not v.strip()):
        raise InvalidJobError(f"{field}={v!r}: give an image reference, e.g. ghcr.io/mpijob/openmpi:4.1", field=field)


def check_int(field: str, v: Any, minimum: int) -> None:
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise InvalidJobError(f"{field}={v!r}: use an integer of at least {minimum}", field=field)


def env_list(env: dict[str, str] | None, from_secret: dict[str, str] | None) -> list[dict[str, Any]]:
    """Variables with values, then variables read from Secrets (``NAME: "SECRET[:KEY]"``);
    a name in both takes the Secret's."""
    check_str_map("env_from_secret", from_secret)
    out: dict[str, dict[str, Any]] = {k: {"name": k, "value": v} for k, v in (env or {}).items()}
    for k, ref in (from_secret or {}).items():
        secret, _, key = ref.partition(":")
        if not secret:
            raise InvalidJobError(f"env_from_secret[{k!r}]={ref!r}: use 'SECRET' or 'SECRET:KEY', e.g. "
                                  "{'AWS_SECRET_ACCESS_KEY': 's3-credentials:secret-key'}", field="env_from_secret")
        out[k] = {"name": k, "valueFrom": {"secretKeyRef": {"name": secret, "key": key or k}}}
    return list(out.values())


def warn_secret_looking(env: dict[str, str] | None) -> None:
    """Warn about an env value that looks like a secret (the redaction rules find one)."""
    for k, v in (env or {}).items():
        r = Redactor()
        r.line(f"{k}={v}")
        if r.count:
            warnings.warn(f"env {k}: the value looks like a secret, and every viewer of the job reads it; put it in "
                          f"a Secret and use env_from_secret={{{k!r}: 'SECRET:KEY'}}", UserWarning, stacklevel=5)


def seconds(field: str, v: Any) -> int:
    """Seconds from an int, a timedelta or a duration such as "90s", "5m", "1h30m"."""
    secs: int | None = None
    if isinstance(v, timedelta):
        secs = int(v.total_seconds())
    elif isinstance(v, int) and not isinstance(v, bool):
        secs = v
    elif isinstance(v, str) and v and (m := _DURATION.match(v.strip())) and any(m.groups()):
        h, mi, se = (int(x or 0) for x in m.groups())
        secs = h * 3600 + mi * 60 + se
    if secs is None or secs <= 0:
        raise InvalidJobError(f"{field}={v!r}: use a positive number of seconds, a timedelta, or a duration such as '5m' or '1h30m'",
                              field=field)
    return secs


def check_seconds(field: str, v: Any) -> None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
        raise InvalidJobError(f"{field}={v!r}: use a positive number of seconds", field=field)


def names(field: str, v: Any) -> list[str]:
    """One name or a list of names (data connections, PVCs)."""
    if v is None:
        return []
    items = [v] if isinstance(v, str) else v
    if not isinstance(items, (list, tuple)) or not all(isinstance(i, str) and i.strip() for i in items):
        raise InvalidJobError(f"{field}={v!r}: give a name or a list of names, e.g. {field}=\"local-s3\"", field=field)
    return list(items)


def tolerations(v: Any) -> list[dict[str, Any]]:
    """Tolerations as ``"KEY[=VALUE][:EFFECT]"`` strings (kubectl taint's form) or dicts
    of a pod's ``tolerations`` (``{"key": ..., "operator": ..., "value": ..., "effect": ...}``)."""
    if v is None:
        return []
    items = [v] if isinstance(v, (str, dict)) else v
    if not isinstance(items, (list, tuple)):
        raise InvalidJobError(f"tolerations={v!r}: give a list such as [\"dedicated=mpi:NoSchedule\"]", field="tolerations")
    out = []
    for t in items:
        if isinstance(t, str) and t.strip():
            out.append(_jobspec.parse_toleration(t))
        elif isinstance(t, dict) and all(isinstance(k, str) for k in t):
            out.append(dict(t))
        else:
            raise InvalidJobError(f"tolerations: {t!r} is no toleration: use \"KEY[=VALUE][:EFFECT]\", e.g. \"dedicated=mpi:NoSchedule\"",
                                  field="tolerations")
    return out


def launcher_flags(v: Any) -> list[str]:
    """mpirun's flags: a string split at spaces, or a list of strings."""
    if v is None:
        return []
    if isinstance(v, str):
        return v.split()
    if not isinstance(v, (list, tuple)) or not all(isinstance(f, str) for f in v):
        raise InvalidJobError(f"launcher_flags={v!r}: give a string such as \"--bind-to none\" or a list of strings", field="launcher_flags")
    return list(v)


def optional_str(field: str, v: Any, example: str) -> str:
    if v is None:
        return ""
    if not isinstance(v, str):
        raise InvalidJobError(f"{field}={v!r}: give a string, e.g. {field}={example!r}", field=field)
    return v.strip() if field != "description" else v


def check_str_map(field: str, m: Any) -> None:
    if m is None:
        return
    if not isinstance(m, dict) or not all(isinstance(k, str) and k and isinstance(v, str) for k, v in m.items()):
        raise InvalidJobError(f"{field}={m!r}: use a dict of non-empty string keys to string values", field=field)


def resources(field: str, res: Any) -> dict[str, str]:
    if not res:
        return {}
    if not isinstance(res, dict):
        raise InvalidJobError(f"{field}={res!r}: use a dict such as {{'nvidia.com/gpu': 4, 'memory': '32Gi'}}", field=field)
    out = {}
    for k, v in res.items():
        if isinstance(v, bool) or not isinstance(v, (int, str)):
            raise InvalidJobError(f"{field}[{k!r}]={v!r} is not a quantity (e.g. 4, '500m', '16Gi')", field=field)
        out[str(k)] = str(v)
    return out


def volumes(volumes: Any) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    out = []
    for i, v in enumerate(volumes or []):
        if not isinstance(v, dict) or not v.get("name") or not v.get("mount_path"):
            raise InvalidJobError(f"volumes[{i}]={v!r}: give name, mount_path and one of pvc, config_map, empty_dir", field="volumes")
        if "pvc" in v:
            src = {"persistentVolumeClaim": {"claimName": v["pvc"]}}
        elif "config_map" in v:
            src = {"configMap": {"name": v["config_map"]}}
        elif "empty_dir" in v:
            src = {"emptyDir": v["empty_dir"] or {}}
        else:
            raise InvalidJobError(f"volumes[{i}] ({v['name']}): give one of pvc, config_map, empty_dir", field="volumes")
        out.append(({"name": v["name"], **src},
                    {"name": v["name"], "mountPath": v["mount_path"], "readOnly": bool(v.get("read_only", False))}))
    return out
