"""Data in, model out and progress for the reference workloads.

Every mpijob image ships this file next to the examples
(/opt/mpijob/examples). It has no dependency beyond the standard library,
except boto3 for s3:// locations (every image has it).

- ``progress(...)`` prints one progress report in the documented line
  format (docs/progress.md): ``MPIJOB_PROGRESS {"epoch": 3, ...}``.
  mpijob-manager reads it from the Launcher's log; the Python SDK's
  ``mpijob.progress`` writes the same line.
- ``read(uri)`` reads a file from ``s3://BUCKET/KEY`` (the job's data
  connection: AWS_* variables), ``file:///path`` or a plain path.
- ``write(uri, name, data)`` writes an artifact under a folder URI, e.g.
  ``$MPIJOB_OUTPUT_URI`` (``s3://BUCKET/JOB/`` on the job's first data
  connection, a folder on its first PVC).
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from typing import Any
from urllib.parse import urlparse

PREFIX = "MPIJOB_PROGRESS "
FIELDS = ("epoch", "total_epochs", "step", "total_steps", "loss", "accuracy", "eta_seconds", "rank_step_seconds")


def progress(out: Any = None, **fields: Any) -> str:
    """Print one progress report; unknown fields go under "metrics". ``resumed`` (a dict:
    epoch, step, age_seconds, from) says where a run took up again (docs/progress.md)."""
    report: dict[str, Any] = {}
    metrics: dict[str, float] = {}
    for k, v in fields.items():
        if v is None:
            continue
        if k == "resumed":
            report[k] = v
            continue
        if isinstance(v, float) and not math.isfinite(v):
            v = str(v)  # NaN or inf: JSON has no number for it
        if k in FIELDS:
            report[k] = v
        else:
            metrics[k] = v
    if metrics:
        report["metrics"] = metrics
    line = PREFIX + json.dumps(report, separators=(", ", ": "), sort_keys=False)
    print(line, file=out or sys.stdout, flush=True)
    return line


class StepTimes:
    """This rank's time computing its steps, not counting the wait for the other ranks in a
    collective (the SDK's mpijob.progress.StepTimes): ``with times:`` around each step's own
    work, then at each report ``every = times.gather(comm)`` on every rank (a collective) and
    ``progress(..., rank_step_seconds=every)`` on rank 0 (docs/progress.md)."""

    def __init__(self) -> None:
        self.seconds, self.steps, self._t = 0.0, 0, 0.0

    def __enter__(self) -> StepTimes:
        self._t = time.monotonic()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds += time.monotonic() - self._t
        self.steps += 1

    def gather(self, comm: Any) -> Any:
        mine = round(self.seconds / self.steps, 6) if self.steps else 0.0
        self.seconds, self.steps = 0.0, 0
        return comm.gather(mine, root=0)


def _s3():
    import boto3  # only s3:// needs it
    from botocore.config import Config

    endpoint = os.environ.get("AWS_S3_ENDPOINT") or None
    return boto3.client(
        "s3",
        # An endpoint that does not answer fails in seconds, not minutes.
        config=Config(connect_timeout=5, read_timeout=60, retries={"max_attempts": 3}),
        endpoint_url=endpoint,
        region_name=os.environ.get("AWS_DEFAULT_REGION") or "us-east-1",
        aws_access_key_id=os.environ.get("AWS_ACCESS_KEY_ID"),
        aws_secret_access_key=os.environ.get("AWS_SECRET_ACCESS_KEY"),
    )


def _split(uri: str) -> tuple[str, str, str]:
    u = urlparse(uri)
    if u.scheme == "s3":
        return "s3", u.netloc, u.path.lstrip("/")
    if u.scheme == "file":
        return "file", "", u.path
    if u.scheme:
        raise ValueError(f"{uri}: use s3://BUCKET/KEY, file:///path or a path")
    return "file", "", uri


def _where() -> str:
    """The data connection as the job has it, for error messages."""
    conns = os.environ.get("MPIJOB_DATA_CONNECTIONS", "")
    name = conns.split(",")[0] if conns else "(none: the job has no data connection)"
    return f"data connection {name}, AWS_S3_ENDPOINT={os.environ.get('AWS_S3_ENDPOINT', '(unset)')}"


def _explain(action: str, uri: str, e: Exception) -> OSError:
    code = getattr(e, "response", {}).get("Error", {}).get("Code", "") if hasattr(e, "response") else ""
    fix = {
        "NoSuchBucket": "the bucket does not exist: fix AWS_S3_BUCKET in the connection",
        "NoSuchKey": "no such object: check the path",
        "AccessDenied": "the store refused the keys: fix AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the connection",
        "InvalidAccessKeyId": "the store does not know AWS_ACCESS_KEY_ID: fix it in the connection",
        "SignatureDoesNotMatch": "AWS_SECRET_ACCESS_KEY is wrong: fix it in the connection",
    }.get(code, code or "check AWS_S3_ENDPOINT in the connection")
    return OSError(f"cannot {action} {uri} ({_where()}): {fix}: {e}")


def read(uri: str) -> bytes:
    """The bytes at uri; a clear error names the location when it fails."""
    kind, bucket, key = _split(uri)
    if kind == "file":
        with open(key, "rb") as f:
            return f.read()
    try:
        body: bytes = _s3().get_object(Bucket=bucket, Key=key)["Body"].read()
        return body
    except Exception as e:  # botocore's errors say what the store said
        raise _explain("read", uri, e) from e


def write(folder: str, name: str, data: bytes) -> str:
    """Write data as folder/name; returns the object's URI."""
    kind, bucket, key = _split(folder.rstrip("/") + "/" + name)
    if kind == "file":
        os.makedirs(os.path.dirname(key), exist_ok=True)
        with open(key, "wb") as f:
            f.write(data)
        return key
    try:
        _s3().put_object(Bucket=bucket, Key=key, Body=data)
    except Exception as e:
        raise _explain("write", f"s3://{bucket}/{key}", e) from e
    return f"s3://{bucket}/{key}"
