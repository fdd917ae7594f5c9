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

    ``causes`` has one entry per resource over quota, read from the structured
    Status mpijob's admission returns (``details.causes`` of type
    ``mpijob.dev/QuotaExceeded``): ``resource`` (for example ``nvidia.com/gpu``),
    ``requested``, ``quota``, ``in_use``, ``resource_quota`` and ``max_workers``
    (the most Workers that would fit; -1: not even the Launcher). ``resource``,
    ``requested``, ``quota`` and ``in_use`` are those of the first one. The
    message also says how to fit.
    """

    def __init__(self, message: str, causes: list[dict[str, Any]] | None = None):
        super().__init__(message)
        self.causes: list[dict[str, Any]] = causes or []
        first = self.causes[0] if self.causes else {}
        self.resource: str | None = first.get("resource")
        self.requested: str | None = first.get("requested")
        self.quota: str | None = first.get("quota")
        self.in_use: str | None = first.get("in_use")


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


# The cause type of mpijob's quota denial (Go: api.QuotaCauseType); its message is JSON.
QUOTA_CAUSE = "mpijob.dev/QuotaExceeded"
# The ValidatingAdmissionPolicy that refuses MPI jobs while no mpijob-manager replica is ready (Go: api.ManagerRunningPolicy).
MANAGER_RUNNING_POLICY = "mpijob-manager-running.mpijob.dev"


def _quota_cause(c: dict[str, Any]) -> dict[str, Any]:
    try:
        q = json.loads(c.get("message") or "")
    except ValueError:
        return {}
    if not isinstance(q, dict):
        return {}
    return {"resource": q.get("resource"), "requested": q.get("requested"), "quota": q.get("quota"), "in_use": q.get("inUse"),
            "resource_quota": q.get("resourceQuota"), "max_workers": q.get("maxWorkers"), "key": c.get("field")}


class APIUnreachableError(MPIJobError, ConnectionError):
    """The Kubernetes API server did not answer; the message names its address and
    what to check (the cluster runs, the kubeconfig context)."""


def from_api_exception(e: Any, name: str = "") -> MPIJobError:
    """Map a ``kubernetes.client.ApiException`` to a typed error."""
    status = getattr(e, "status", None)
    message = getattr(e, "reason", "") or str(e)
    body = getattr(e, "body", None)
    st: dict[str, Any] = {}
    if body:
        try:
            parsed = json.loads(body)
            if isinstance(parsed, dict):
                st = parsed
                message = st.get("message", message)
        except ValueError:
            message = str(body)
    causes = ((st.get("details") or {}).get("causes")) or []
    quota = [_quota_cause(c) for c in causes if c.get("reason") == QUOTA_CAUSE]
    if quota:
        return QuotaExceededError(message, [q for q in quota if q])
    if status == 422 or st.get("reason") == "Invalid":
        return InvalidJobError(message, field=next((c.get("field") for c in causes if c.get("field")), None))
    if MANAGER_RUNNING_POLICY in message:
        # The API server's own policy: no mpijob-manager replica is ready; its sentence says what to do.
        return MPIJobError("mpijob admission is unavailable: " + message.split("denied request: ", 1)[-1])
    if "failed calling webhook" in message and ".mpijob.dev" in message:
        return MPIJobError("mpijob admission is unavailable, so no MPI job can be created or changed now (jobs already "
                           "running are not affected): try again in a minute; if it lasts, ask an administrator to check "
                           "mpijob-manager (kubectl -n mpijob-system get pods). The API server said: " + message)
    if "admission webhook" in message:
        # Other webhooks' denials (Trainer's, Kueue's) carry no structure of their own.
        return InvalidJobError(message)
    if status == 403:
        return PermissionDeniedError(message)
    if status == 404:
        return JobNotFoundError(message, name=name)
    if status == 409:
        return InvalidJobError(message + " (pick another name, or delete the job first)", field="name")
    return MPIJobError(f"API error {status}: {message}")


def explain(e: BaseException) -> MPIJobError | None:
    """The cluster's refusal inside another client's exception, as a typed mpijob error (None when
    there is none). The official Kubeflow SDK raises ``RuntimeError("Failed to create TrainJob: ...")``
    and keeps the API server's answer, where mpijob's admission says what is wrong and the fix, in
    ``__cause__``::

        from kubeflow.trainer import TrainerClient
        import mpijob

        try:
            TrainerClient().train(runtime=..., trainer=...)
        except RuntimeError as e:
            refusal = mpijob.explain(e)
            if refusal is None:
                raise
            print(refusal)  # the field, the value and the fix, as kubectl mpijob says them

    It follows ``__cause__`` and ``__context__`` to the first ``kubernetes.client.ApiException`` (or
    an exception with its ``status`` and ``body``) and maps it as the mpijob SDK's own calls do.
    """
    seen: set[int] = set()
    cur: BaseException | None = e
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, MPIJobError):
            return cur
        if isinstance(getattr(cur, "status", None), int) and hasattr(cur, "body"):
            return from_api_exception(cur)
        cur = cur.__cause__ or cur.__context__
    return None
