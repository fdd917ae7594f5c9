"""The backend interface ``MPIJobClient`` delegates to (as the Kubeflow SDK's ``backends/base.py``).

A backend holds the logic of every call; ``KubernetesBackend`` is the one that talks to a cluster.
The calls' meaning and arguments are documented on ``MPIJobClient``.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any

from .. import progress as _progress
from ..registry import Registration
from ..stacks import Stacks
from ..types import (
    JobEvent,
    JobSpec,
    LifecycleEvent,
    MPIJob,
    Runtime,
)


class Backend(abc.ABC):
    """What every backend does: the calls of ``MPIJobClient``."""

    namespace: str
    #: Where the last get_logs read each pod's lines: "pod", "log store" or "log store, then pod".
    last_log_sources: dict[str, str]

    @abc.abstractmethod
    def create_job(self, spec: JobSpec, dry_run: bool = False) -> MPIJob:
        """Create the job ``spec`` describes (with ``dry_run``, let the cluster check it only)."""

    @abc.abstractmethod
    def get_progress(self, name: str) -> list[_progress.Report]:
        ...

    @abc.abstractmethod
    def get_stacks(self, name: str) -> Stacks:
        ...

    @abc.abstractmethod
    def get_artifacts(self, name: str, download_dir: str | None = None, files: Sequence[str] | None = None,
                      overwrite: bool = False) -> list[dict[str, Any]]:
        ...

    @abc.abstractmethod
    def register_model(self, job: str, name: str, version: str | None = None, artifact: str | None = None,
                       registry: str | None = None, registry_url: str | None = None, registry_ca: str | None = None,
                       new_model: bool = False) -> Registration:
        ...

    @abc.abstractmethod
    def get_job(self, name: str) -> MPIJob:
        ...

    @abc.abstractmethod
    def list_jobs(self, runtime: str | None = None, phase: str | None = None, full: bool = False,
                  all_frameworks: bool = False) -> list[MPIJob]:
        ...

    @abc.abstractmethod
    def list_runtimes(self) -> list[Runtime]:
        ...

    @abc.abstractmethod
    def wait_for_job(self, name: str, phases: Iterable[str] = ("Succeeded",), timeout: float = 600,
                     poll_interval: float = 2) -> MPIJob:
        ...

    @abc.abstractmethod
    def watch(self, name: str, timeout: float = 3600, events: bool = True) -> Iterator[LifecycleEvent]:
        ...

    @abc.abstractmethod
    def get_events(self, name: str) -> list[JobEvent]:
        ...

    @abc.abstractmethod
    def get_logs(self, name: str, worker: int | str | None = None, follow: bool = False,
                 since: int | str | timedelta | None = None, until: datetime | None = None,
                 tail: int | None = None, grep: str | None = None, redact: bool = True,
                 rank: int | str | None = None, source: str = "auto") -> str | Iterator[str]:
        ...

    @abc.abstractmethod
    def delete_job(self, name: str, grace_period: int | None = None, wait: bool = True, timeout: float = 120) -> None:
        ...

    @abc.abstractmethod
    def suspend_job(self, name: str) -> str:
        ...

    @abc.abstractmethod
    def resume_job(self, name: str) -> str:
        ...

    @abc.abstractmethod
    def clone_job(self, name: str, new_name: str, **overrides: Any) -> MPIJob:
        ...

    @abc.abstractmethod
    def convert_legacy(self, manifest: str | dict[str, Any]) -> dict[str, Any]:
        ...
