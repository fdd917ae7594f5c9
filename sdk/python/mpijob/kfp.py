"""Kubeflow Pipelines v2 components for MPI jobs (``pip install "mpijob[kfp]"``).

- :func:`run_mpi_job` creates an MPI job from a :class:`mpijob.JobSpec` (as
  :func:`spec_input` turns it into a pipeline parameter), waits until it ends,
  and returns the job's name, its artifacts' folder URI, its model file's URI
  and its last metrics. A job that fails fails the step, with the diagnosis.
- :func:`register_model` registers a succeeded job's model in the Model
  Registry, as :meth:`mpijob.MPIJobClient.register_model` does.

Each component talks to the cluster as the step's identity: in a pipeline pod,
its ServiceAccount (in-cluster credentials); under ``kfp.local``, the
kubeconfig (``kubeconfig=`` and ``context=`` name them). Nothing else is needed
in the step's image than this package::

    from kfp import dsl
    from mpijob import JobSpec
    from mpijob.kfp import register_model, run_mpi_job, spec_input

    @dsl.pipeline
    def train(namespace: str = "team-a"):
        job = run_mpi_job(spec=spec_input(JobSpec(name="digits", command=[...], workers=2,
                                                  data_connection="s3-data")), namespace=namespace)
        register_model(job=job.outputs["job"], name="digits-classifier", version="v1", namespace=namespace)

``examples/pipelines/digits_pipeline.py`` is a whole pipeline (MPI training, a
PyTorch TrainJob that scores the model, registration); ``make test`` runs it with
``kfp.local``'s SubprocessRunner against the local cluster and its registry.
"""

# No "from __future__ import annotations": KFP reads the components' types
# from their annotations as objects.
import dataclasses
from typing import Any

from kfp import dsl

from . import _kfp_steps as _steps
from .types import JobSpec

#: The image the components run in on a KFP backend: a Python image; the step
#: installs ``PACKAGES`` into it. Override with :func:`components`.
BASE_IMAGE = "python:3.11-slim"
#: What the step installs (the SDK, with boto3 for artifacts on S3).
PACKAGES = ["mpijob[s3]"]


def spec_input(spec: JobSpec) -> dict[str, Any]:
    """``spec`` as a pipeline parameter (a dict of its fields that are set): what
    :func:`run_mpi_job` takes as ``spec`` and turns back into the same JobSpec."""
    if not isinstance(spec, JobSpec):
        from .errors import InvalidJobError

        raise InvalidJobError(f"spec: a {type(spec).__name__} is not a JobSpec: build one with mpijob.JobSpec(name=..., command=[...], workers=N)",
                              field="spec")
    out = {}
    for f in dataclasses.fields(spec):
        v = getattr(spec, f.name)
        if v is not None and v != f.default:
            out[f.name] = list(v) if isinstance(v, tuple) else v
    out.setdefault("name", spec.name)
    out.setdefault("workers", spec.workers)
    out.setdefault("command", list(spec.command) if spec.command is not None else None)
    return out


def components(base_image: str = BASE_IMAGE, packages: list[str] | None = None) -> tuple[Any, Any]:
    """The two components with another image or packages (a registry of your own, a pinned
    version): ``run_mpi_job, register_model = components("quay.io/me/mpijob-step:1", [])``."""
    pkgs = PACKAGES if packages is None else packages
    return (dsl.component(_steps.run_mpi_job, base_image=base_image, packages_to_install=pkgs),
            dsl.component(_steps.register_model, base_image=base_image, packages_to_install=pkgs))


run_mpi_job, register_model = components()
