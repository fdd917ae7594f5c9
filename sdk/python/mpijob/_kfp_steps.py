"""The functions of mpijob.kfp's components. KFP copies each function's source
into the step and runs it alone: each imports what it uses inside itself, and
the step's Python provides ``NamedTuple`` (KFP adds ``from typing import *``).
Not for direct use: see :mod:`mpijob.kfp`."""

# No "from __future__ import annotations": KFP reads the types from the
# annotations as objects.
from typing import NamedTuple


def run_mpi_job(spec: dict, namespace: str = "", context: str = "", kubeconfig: str = "",  # type: ignore[type-arg]
                timeout_seconds: int = 3600) -> NamedTuple("Outputs", [("job", str), ("artifacts_uri", str),  # type: ignore[valid-type]
                                                                       ("model_uri", str), ("metrics", dict)]):
    """Create the MPI job ``spec`` describes (:func:`mpijob.kfp.spec_input` of a JobSpec) in
    ``namespace`` and wait until it ends (at most ``timeout_seconds``). Returns the job's name,
    its artifacts' folder (``s3://BUCKET/JOB/``, "" without a data connection), its model
    file's URI ("" when it wrote none) and its last reported metrics. A job that does not
    succeed fails the step with its diagnosis. A job of that name that already succeeded
    (a step run again) is not created again: its outputs are returned."""
    import collections
    import sys
    from typing import Any

    from mpijob import JobSpec, MPIJobClient
    from mpijob.errors import JobNotFoundError
    from mpijob.registry import pick_model

    def whole(v: Any) -> Any:  # a pipeline parameter's numbers arrive as floats (protobuf's Struct): 2.0 is 2
        if isinstance(v, float) and v.is_integer():
            return int(v)
        if isinstance(v, str) and sys.executable.endswith("python3"):
            # kfp.local's SubprocessRunner writes its own Python's path for every "python3"
            # in the step's command line, the inputs included (replace_python_executable):
            # a job's "python3" is the image's, not this machine's.
            return v.replace(sys.executable, "python3")
        if isinstance(v, dict):
            return {k: whole(x) for k, x in v.items()}
        if isinstance(v, list):
            return [whole(x) for x in v]
        return v

    client = MPIJobClient(namespace=namespace or None, context=context or None, config_file=kubeconfig or None)
    job_spec = JobSpec(**whole(dict(spec)))
    try:
        done = client.get_job(job_spec.name).status.phase == "Succeeded"
    except JobNotFoundError:
        done = False
    if not done:
        client.submit_job(job_spec)
        print(f"created MPI job {job_spec.name} in namespace {client.namespace}: waiting until it ends", flush=True)
    job = client.wait_for_job(job_spec.name, phases=["Succeeded"], timeout=timeout_seconds, poll_interval=5)
    print(f"MPI job {job.name}: {job.status.phase}: {job.status.message}", flush=True)
    folder, model = "", ""
    if job_spec.data_connection or job_spec.pvc:
        arts = client.get_artifacts(job.name)
        names = [a["name"] for a in arts]
        if arts and arts[0].get("uri"):
            first = arts[0]
            folder = first["uri"][: len(first["uri"]) - len(first["name"])]
            try:
                picked = pick_model(job.name, names)
                model = next(a.get("uri", "") for a in arts if a["name"] == picked)
            except Exception as e:
                print(f"no model file: {e}", flush=True)
    metrics = dict(job.progress.metrics) if job.progress else {}
    Outputs = collections.namedtuple("Outputs", ["job", "artifacts_uri", "model_uri", "metrics"])
    return Outputs(job.name, folder, model, metrics)


def register_model(job: str, name: str, version: str = "", artifact: str = "", namespace: str = "", context: str = "",
                   kubeconfig: str = "", registry: str = "", registry_url: str = "", new_model: bool = True) -> str:
    """Register the model of succeeded MPI job ``job`` as ``version`` (default: the job's name)
    of model ``name`` (:meth:`mpijob.MPIJobClient.register_model`); the same registration again
    changes nothing. Returns the registered URI."""
    from mpijob import MPIJobClient

    client = MPIJobClient(namespace=namespace or None, context=context or None, config_file=kubeconfig or None)
    reg = client.register_model(job, name, version=version or None, artifact=artifact or None, registry=registry or None,
                                registry_url=registry_url or None, new_model=new_model)
    print(f"{'already registered' if reg.unchanged else 'registered'} {name}:{version or job} from MPI job {job}: {reg.uri}", flush=True)
    return reg.uri
