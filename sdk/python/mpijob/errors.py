"""Typed errors of the mpijob SDK.

Every error says what was wrong and what to do; API errors are mapped to
these types so callers can branch on them::

    try:
        client.create_job("big", command=[...], workers=8, resources_per_worker={"nvidia.com/gpu": 4})
    except QuotaExceededError as e:
        print(e.requested, e.quota, e.in_use)
"""

from __future__ import annotations

import json
import re
from typing import Any


class MPIJobError(Exception):
    """Base class of every mpijob SDK error."""


class InvalidJobError(MPIJobError, ValueError):
    """A job setting is invalid; ``field`` names it (checked before any API call,
    or refused by the cluster's validation)."""

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.field = field


class JobNotFoundError(MPIJobError, LookupError):
    """No MPI job of that name in the namespace; ``suggestion`` is a close name, if any."""

    def __init__(self, message: str, name: str = "", suggestion: str | None = None):
        super().__init__(message)
        self.name = name
        self.suggestion = suggestion


class PermissionDeniedError(MPIJobError, PermissionError):
    """RBAC refused the request; the message names the user, verb and namespace."""


class QuotaExceededError(MPIJobError):
    """Admission refused the job: it does not fit the namespace's quota.

    ``requested``, ``quota`` and ``in_use`` are the numbers of the first
    resource over quota, and ``resource`` its name (for example
    ``nvidia.com/gpu``); the message also says how to fit.
    """

    def __init__(self, message: str):
        super().__init__(message)
        m = re.search(r"requested (\S+) (\S+) \(.*?\), quota (\S+), in use (\S+?):", message)
        self.requested: str | None = m.group(1) if m else None
        self.resource: str | None = m.group(2) if m else None
        self.quota: str | None = m.group(3) if m else None
        self.in_use: str | None = m.group(4) if m else None


class JobFailedError(MPIJobError):
    """The job ended in a phase it was not waited for; ``status`` holds the
    diagnosis (reason, message, next step)."""

    def __init__(self, message: str, status: Any = None):
        super().__init__(message)
        self.status = status


class WaitTimeoutError(MPIJobError, TimeoutError):
    """The job did not reach the wanted phase in time; ``status`` is its last status."""

    def __init__(self, message: str, status: Any = None):
        super().__init__(message)
        self.status = status


class APIUnreachableError(MPIJobError, ConnectionError):
    """The Kubernetes API server did not answer; the message names its address and
    what to check (the cluster runs, the kubeconfig context)."""


def from_api_exception(e: Any, name: str = "") -> MPIJobError:
    """Map a ``kubernetes.client.ApiException`` to a typed error."""
    status = getattr(e, "status", None)
    message = getattr(e, "reason", "") or str(e)
    body = getattr(e, "body", None)
    if body:
        try:
            message = json.loads(body).get("message", message)
        except (ValueError, AttributeError):
            message = str(body)
    if "admission webhook" in message and "quota" in message:
        return QuotaExceededError(message)
    if "admission webhook" in message or status == 422:
        return InvalidJobError(message)
    if status == 403:
        return PermissionDeniedError(message)
    if status == 404:
        return JobNotFoundError(message, name=name)
    if status == 409:
        return InvalidJobError(message + " (pick another name, or delete the job first)", field="name")
    return MPIJobError(f"API error {status}: {message}")
