"""Which TrainJobs are MPI jobs: the rule admission scopes MPI jobs by, with namespaced runtimes
(Go's ``jobview.FrameworkOf``; both read the vectors in ``pkg/jobview/testdata/frameworks.json``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MPI = "mpi"
UNKNOWN = "unknown"
BASE_RUNTIME_LABEL = "mpijob.dev/base-runtime"
FRAMEWORK_LABEL = "trainer.kubeflow.org/framework"


def runtime_framework(spec: Mapping[str, Any] | None, labels: Mapping[str, str] | None) -> str:
    """A runtime's framework: ``mpi`` when its ML policy is MPI (DeepSpeed and Horovod runtimes
    included), else its ``trainer.kubeflow.org/framework`` label, else ``torch`` for a Torch
    policy, else ``unknown``."""
    policy = (spec or {}).get("mlPolicy") or {}
    if policy.get("mpi") is not None:
        return MPI
    label = ((labels or {}).get(FRAMEWORK_LABEL) or "").lower()
    if label and label != MPI:
        return label
    if policy.get("torch") is not None:
        return "torch"
    return UNKNOWN


def framework_of(name: str, namespace: str, labels: Mapping[str, str] | None, runtime_kind: str, runtime_name: str,
                 cluster: Mapping[str, str], namespaced: Mapping[str, Mapping[str, str]]) -> str:
    """A job's framework from its name, namespace, labels and ``spec.runtimeRef`` (kind and
    name), given the framework of each ClusterTrainingRuntime (``cluster``) and of each namespace's
    TrainingRuntimes (``namespaced``)."""
    if BASE_RUNTIME_LABEL in (labels or {}):
        return MPI
    if runtime_kind == "TrainingRuntime":
        if runtime_name == name:
            return MPI  # mpijob's per-job runtime
        return (namespaced.get(namespace) or {}).get(runtime_name, UNKNOWN)
    if runtime_name in cluster:
        return cluster[runtime_name]
    if runtime_name.startswith("mpi-"):
        return MPI  # a typo of an MPI runtime: admission answers it with a suggestion
    return UNKNOWN


def framework_of_trainjob(obj: Mapping[str, Any], cluster: Mapping[str, str], namespaced: Mapping[str, Mapping[str, str]],
                          runtime: str = "") -> str:
    """:func:`framework_of` for a TrainJob as the API returns it. ``runtime`` stands in for
    ``spec.runtimeRef.name`` when the object has no spec (a metadata list: the runtime
    mpijob-manager's status names, as Go's ``listRows`` takes it)."""
    meta = obj.get("metadata") or {}
    ref = (obj.get("spec") or {}).get("runtimeRef") or {}
    return framework_of(meta.get("name", ""), meta.get("namespace", ""), meta.get("labels") or {}, ref.get("kind") or "",
                        ref.get("name") or runtime, cluster, namespaced)
