"""The official Kubeflow SDK (PyPI ``kubeflow``, pinned in the test extras)
against the real local cluster with mpijob installed, as a tenant (dev-a in
team-a): it reads mpijob's runtimes and jobs, and its ``train()`` either runs
as asked or is refused at admission, naming the field, the runtime and the
way out."""

import logging
import uuid

import pytest
from kubeflow.common.types import KubernetesBackendConfig
from kubeflow.trainer import CustomTrainerContainer, TrainerClient
from kubernetes.client.rest import ApiException

import mpijob
from mpijob import MPIJobClient

USER_IMAGE = "localhost/mpijob/user-train:1"
SHIPPED = {"mpi-openmpi", "mpi-openmpi-gpu", "mpi-mpich", "mpi-intel", "mpi-openmpi5", "mpi-horovod", "mpi-deepspeed"}

pytestmark = pytest.mark.cluster


def _trainer(kubeconfig_path):
    return TrainerClient(KubernetesBackendConfig(namespace="team-a", context="dev-a", config_file=kubeconfig_path))


def test_reads_runtimes_without_errors_or_403(kubeconfig_path, caplog):
    """list_runtimes/get_runtime work on every shipped runtime, and the tenant may read Trainer's version."""
    with caplog.at_level(logging.WARNING, logger="kubeflow"):
        tc = _trainer(kubeconfig_path)
        runtimes = {r.name: r for r in tc.list_runtimes()}
    assert set(runtimes) >= SHIPPED, sorted(runtimes)
    assert not [r for r in caplog.records if "not available" in r.getMessage() or "403" in r.getMessage()], caplog.text
    for name in sorted(SHIPPED):
        rt = tc.get_runtime(name)
        assert rt.name == name and rt.trainer.framework == "mpi", rt
        # One meaning of size: nodes are the Workers, the Launcher is apart.
        assert rt.trainer.num_nodes == 1, (name, rt.trainer)
        assert rt.trainer.device in ("cpu", "gpu"), (name, rt.trainer)
    # (The Kubeflow SDK reads the device off the Launcher's container, which
    # has no GPU on any mpijob runtime: it says "cpu" for mpi-openmpi-gpu too.)


def test_reads_mpijob_jobs_with_their_own_runtime(kubeconfig_path):
    """A job made by mpijob's SDK with its own image and resources (a per-job runtime) reads
    back through the Kubeflow SDK: list_jobs, get_job, get_job_logs and get_job_events."""
    mp = MPIJobClient(namespace="team-a", context="dev-a", config_file=kubeconfig_path)
    name = f"kf-{uuid.uuid4().hex[:5]}"
    mp.create_job(name, command=None, workers=2, image=USER_IMAGE, resources_per_worker={"cpu": "300m", "memory": "300Mi"})
    try:
        mp.wait_for_job(name, timeout=180)
        tc = _trainer(kubeconfig_path)
        jobs = {j.name: j for j in tc.list_jobs()}
        assert name in jobs, sorted(jobs)
        job = tc.get_job(name)
        assert job.num_nodes == 2, job
        assert job.status == "Complete", job.status
        assert job.runtime.trainer.framework == "mpi"
        # The Kubeflow SDK calls the Launcher "node-0" (its default step for logs).
        launcher = next(s for s in job.steps if s.name == "node-0")
        assert "-launcher-" in launcher.pod_name, job.steps
        logs = "\n".join(tc.get_job_logs(name))
        assert "allreduce over 2 ranks ok" in logs, logs
        events = tc.get_job_events(name)
        assert events, "no events for the job"
    finally:
        mp.delete_job(name, wait=True, timeout=120)


def test_train_with_the_runtimes_image_runs_on_two_workers(kubeconfig_path):
    """train(CustomTrainerContainer(image=the runtime's image, num_nodes=2)) on mpi-openmpi: 2 Workers + the Launcher."""
    tc = _trainer(kubeconfig_path)
    runtime = tc.get_runtime("mpi-openmpi")
    mp = MPIJobClient(namespace="team-a", context="dev-a", config_file=kubeconfig_path)
    image = next(r.worker_image for r in mp.list_runtimes() if r.name == "mpi-openmpi")
    name = tc.train(runtime=runtime, trainer=CustomTrainerContainer(image=image, num_nodes=2))
    try:
        tc.wait_for_job_status(name, status={"Complete", "Failed"}, timeout=180)
        job = tc.get_job(name)
        assert job.status == "Complete" and job.num_nodes == 2, job
        got = mp.get_job(name)
        assert (got.workers, got.status.workers_total, got.status.phase) == (2, 2, "Succeeded"), got
        assert "allreduce over 2 ranks ok" in "\n".join(tc.get_job_logs(name))
    finally:
        tc.delete_job(name)


@pytest.mark.parametrize("trainer,field", [
    (CustomTrainerContainer(image=USER_IMAGE, num_nodes=2), "spec.trainer.image"),
    (CustomTrainerContainer(image="ghcr.io/mpijob/openmpi:4.1", num_nodes=2, resources_per_node={"cpu": 1, "memory": "1Gi"}),
     "spec.trainer.resourcesPerNode"),
], ids=["own-image", "resources"])
def test_train_that_would_reach_the_launcher_only_is_refused(kubeconfig_path, trainer, field):
    """An image or resources that Trainer would give the Launcher alone is refused, naming the field,
    the runtime and the way out; nothing is left behind."""
    tc = _trainer(kubeconfig_path)
    before = {j.name for j in tc.list_jobs()}
    with pytest.raises(RuntimeError) as e:
        tc.train(runtime=tc.get_runtime("mpi-openmpi"), trainer=trainer)
    cause = e.value.__cause__
    assert isinstance(cause, ApiException) and cause.status in (400, 403, 422), cause
    body = cause.body if isinstance(cause.body, str) else cause.body.decode()
    assert field in body and "mpi-openmpi" in body and "kubectl mpijob create" in body, body
    # mpijob.explain reads the same refusal out of the Kubeflow SDK's exception, as docs/runtimes.md shows.
    refusal = mpijob.explain(e.value)
    assert isinstance(refusal, mpijob.InvalidJobError) and "kubectl mpijob create" in str(refusal), refusal
    # Refused at admission: nothing was stored, so the list says so at once.
    assert {j.name for j in tc.list_jobs()} == before
