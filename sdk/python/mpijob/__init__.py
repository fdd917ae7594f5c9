"""mpijob: create, watch, debug and clean up MPI jobs on Kubeflow Trainer V2 from Python.

An MPI job is a TrainJob whose runtime has an MPI policy: one Launcher runs
``mpirun``; Workers host the ranks, ``slots_per_worker`` each. Status (phase,
reason, next step) comes from mpijob-manager::

    from mpijob import MPIJobClient
    client = MPIJobClient(namespace="team-a")
    client.create_job("hello", command=None, workers=2)
    print(client.wait_for_job("hello").status.phase)
"""

from .client import MPIJobClient
from .errors import (
    APIUnreachableError,
    InvalidJobError,
    JobFailedError,
    JobNotFoundError,
    MPIJobError,
    PermissionDeniedError,
    QuotaExceededError,
    WaitTimeoutError,
    explain,
)
from .logs import merge_logs
from .redact import Redactor, redact
from .registry import Registration, RegistryUnreachableError, VersionTakenError
from .stacks import Stacks
from .types import PHASES, FailedPod, JobEvent, JobRow, JobSpec, JobStatus, LifecycleEvent, MPIJob, PodRecord, PodRef, Runtime, Transition, is_job_object

__all__ = [
    "PHASES",
    "APIUnreachableError",
    "FailedPod",
    "InvalidJobError",
    "JobEvent",
    "JobFailedError",
    "JobNotFoundError",
    "JobRow",
    "JobSpec",
    "JobStatus",
    "LifecycleEvent",
    "MPIJob",
    "MPIJobClient",
    "MPIJobError",
    "PermissionDeniedError",
    "PodRecord",
    "PodRef",
    "QuotaExceededError",
    "Redactor",
    "Registration",
    "RegistryUnreachableError",
    "Runtime",
    "Stacks",
    "Transition",
    "VersionTakenError",
    "WaitTimeoutError",
    "explain",
    "is_job_object",
    "merge_logs",
    "redact",
]
__version__ = "0.1.0"
