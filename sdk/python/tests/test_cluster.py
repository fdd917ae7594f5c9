"""Integration tests against the real local cluster (``make dev-detach``);
``make test`` runs them after the Go e2e tests on the same cluster."""

import re
import time
import uuid

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.rest import ApiException

from mpijob import (
    InvalidJobError,
    JobFailedError,
    JobNotFoundError,
    MPIJobClient,
    PermissionDeniedError,
    QuotaExceededError,
    jobspec,
)

# The local cluster's stand-in for a user's own image (pkg/localcluster.UserImage).
USER_IMAGE = "localhost/mpijob/user-train:1"

pytestmark = pytest.mark.cluster


def unique(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:5]}"


@pytest.fixture
def namespace(kubeconfig_path):
    """A namespace of one test, made and removed as the cluster admin."""
    api = k8s.CoreV1Api(k8s_config.new_client_from_config(config_file=kubeconfig_path, context="admin"))
    name = unique("sdk")
    api.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=name, labels={"mpijob.dev/test": "sdk"})))
    yield name
    api.delete_namespace(name)


def test_real_mpi_job_end_to_end(kubeconfig_path):
    """dev-a in team-a: create → watch → logs from both real nodes → delete, in under 20 lines of user code."""
    client = MPIJobClient(namespace="team-a", context="dev-a", config_file=kubeconfig_path)
    name = unique("sdk-hello")
    job = client.create_job(name, command=None, workers=2, slots_per_worker=2)
    assert (job.name, job.workers, job.slots_per_worker) == (name, 2, 2)
    try:
        evs = list(client.watch(name, timeout=180))
        kinds = [ev.kind for ev in evs if ev.kind != "event"]
        assert kinds[0] == "submitted" and kinds[-1] == "completed", kinds
        assert "running" in kinds or "scheduling" in kinds, kinds
        assert all(ev.message for ev in evs), [(ev.kind, ev.message) for ev in evs]
        # The job's own Kubernetes Events, and only its own.
        events = [ev.event for ev in evs if ev.kind == "event"]
        assert events and all(e.object == name or e.object.startswith(name + "-") or e.object.startswith("trainjob-" + name) for e in events), events
        assert {(e.kind, e.object, e.reason) for e in events} <= {(e.kind, e.object, e.reason) for e in client.get_events(name)}
        got = client.get_job(name)
        assert got.status.phase == "Succeeded" and got.status.creator == "dev-a"
        assert got.status.workers_total == 2
        logs = client.get_logs(name)
        hosts = set(re.findall(r"rank \d of 4 on (\S+)", logs))
        assert len(hosts) == 2, logs  # ranks on both Workers, one per real node
        assert "allreduce over 4 ranks ok" in logs
        # mpirun forwards the ranks' lines in any order: 4 rank lines and the allreduce line,
        # each tagged with the rank that printed it (the OpenMPI runtime's orte_tag_output).
        followed = list(client.get_logs(name, follow=True, tail=10))
        assert len(followed) == 5 and "[1,0]<stdout>:mpi-hello: allreduce over 4 ranks ok (sum 6)" in followed, followed
        assert sorted(line.split("]")[0] for line in followed if "rank " in line and " of 4 on " in line) == \
            ["[1,0", "[1,1", "[1,2", "[1,3"], followed
        assert client.get_logs(name, rank=2).count("mpi-hello: rank 2 of 4 on ") == 1
        merged = client.get_logs(name, worker="all", grep="allreduce")
        assert merged.strip().endswith("allreduce over 4 ranks ok (sum 6)") and "rank 0" not in merged
        assert name in [j.name for j in client.list_jobs(phase="Succeeded")]
        # The list reads metadata and the manager's status (no spec in raw); its row is the one
        # read from the whole TrainJob.
        fast = next(j for j in client.list_jobs() if j.name == name)
        whole = next(j for j in client.list_jobs(full=True) if j.name == name)
        assert fast.raw["kind"] == "PartialObjectMetadata" and "spec" not in fast.raw, fast.raw.keys()
        assert whole.raw["kind"] == "TrainJob" and whole.raw["spec"]["trainer"]["numNodes"] == 2
        row = ("name", "namespace", "runtime", "workers", "slots_per_worker", "created", "queue")
        assert [getattr(fast, f) for f in row] == [getattr(whole, f) for f in row] == \
            [name, "team-a", "mpi-openmpi", 2, 2, whole.created, whole.queue], (fast, whole)
        assert fast.status.phase == whole.status.phase == "Succeeded"
    finally:
        client.delete_job(name)
    with pytest.raises(JobNotFoundError):
        client.get_job(name)


def test_failure_diagnosis_and_clone(kubeconfig_path, namespace):
    client = MPIJobClient(namespace=namespace, context="admin", config_file=kubeconfig_path)
    client.create_job("boom", command=["sh", "-c", "echo token=abc123; exit 3"], workers=1)
    with pytest.raises(JobFailedError) as e:
        client.wait_for_job("boom", timeout=180)
    assert e.value.status.phase == "Failed" and e.value.status.reason and e.value.status.next_step
    logs = client.get_logs("boom")
    assert "token=[REDACTED]" in logs and "abc123" not in logs
    clone = client.clone_job("boom", "boom-fixed", command=["sh", "-c", "echo fixed"])
    assert clone.name == "boom-fixed"
    assert client.wait_for_job("boom-fixed", timeout=180).status.phase == "Succeeded"
    assert client.get_job("boom").raw["spec"]["trainer"]["command"][0] == "sh"
    with pytest.raises(JobNotFoundError, match="did you mean 'boom'"):
        client.get_job("bom")


def test_oom_diagnosis_read_from_python(kubeconfig_path, namespace):
    """A Worker OOMKilled (faked by mpijob's kwok stage) is diagnosed by mpijob-manager and read here."""
    client = MPIJobClient(namespace=namespace, context="admin", config_file=kubeconfig_path)
    patch = {"manager": "mpijob.dev/e2e", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
        {"name": rj, "template": {"spec": {"template": {
            "metadata": {"labels": {"kwok.mpijob.dev/fail": "OOMKilled"}} if rj == "node" else None,
            "spec": {"nodeSelector": {"type": "kwok"},
                     "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}}}}}
        for rj in ("launcher", "node")]}}}}
    # The Workers' memory goes into the job's own runtime, as create_job does it.
    job = jobspec.build(jobspec.Input(name="oom", namespace=namespace, runtime="mpi-openmpi-gpu", workers=2,
                                      resources_per_worker={"memory": "2Gi"}), client._backend._runtime("mpi-openmpi-gpu"))
    job.train_job["spec"]["runtimePatches"] = [patch]
    client._backend._create(job, False)
    with pytest.raises(JobFailedError) as e:
        client.wait_for_job("oom", timeout=120)
    s = e.value.status
    assert s.reason == "WorkerOOMKilled", s
    assert "2Gi" in s.message and s.next_step


def test_quota_denial(kubeconfig_path):
    client = MPIJobClient(namespace="team-a", context="dev-a", config_file=kubeconfig_path)
    with pytest.raises(QuotaExceededError) as e:
        client.create_job("too-big", command=None, workers=4, runtime="mpi-openmpi-gpu", resources_per_worker={"nvidia.com/gpu": 3})
    assert (e.value.resource, e.value.requested, e.value.quota) == ("nvidia.com/gpu", "12", "8")
    # A job that fits passes the same check (server dry run: nothing is created).
    ok = client.create_job("fits", command=None, workers=1, runtime="mpi-openmpi-gpu",
                           resources_per_worker={"nvidia.com/gpu": 4, "memory": "1Gi"}, dry_run=True)
    assert ok.name == "fits"
    # The dry run says whether the cluster can place it now, as `create --dry-run=server` does:
    # the fit (its 4 GPUs on one kwok node, its Launcher on a real one) and team-a's default Kueue
    # queue. dev-a may not list nodes, so the cluster's free GPUs are not said.
    assert len(ok.placement) == 2, ok.placement
    # (Whether the Launcher fits depends on what else runs on the real nodes now.)
    assert ok.placement[0].startswith(("fits now: the Launcher and 1 Worker (each 4 nvidia.com/gpu", "does not fit now: ")), ok.placement
    assert not any(p.startswith("free GPUs now") for p in ok.placement), ok.placement
    assert ok.placement[1].startswith("Kueue queue team-a/default (ClusterQueue team-a): "), ok.placement
    with pytest.raises(JobNotFoundError):
        client.get_job("fits")
    # Neither the refused job nor the dry run leaves its runtime behind (the
    # manager lifts the runtime's finalizer once it sees no job: seconds).
    for name in ("too-big", "fits"):
        _wait_gone(client, name)


def _wait_gone(client, name, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            client._backend._api._custom.get_namespaced_custom_object("trainer.kubeflow.org", "v1alpha1", "team-a", "trainingruntimes", name)
        except ApiException as e:
            assert e.status == 404
            return
        time.sleep(0.5)
    raise AssertionError(f"runtime {name} is still there {timeout}s after its job was refused or deleted")


def test_own_image_and_resources_on_every_worker(kubeconfig_path):
    """The SDK's image and resources reach the Launcher and every Worker of mpi-openmpi, and the job succeeds."""
    client = MPIJobClient(namespace="team-a", context="dev-a", config_file=kubeconfig_path)
    name = f"sdk-own-{int(time.time()) % 100000}"
    # JobSet stops the Workers once the Launcher is done: the job stays a
    # moment so its pods can be looked at while it runs.
    client.create_job(name, command=["sh", "-c", "mpirun /usr/local/bin/mpi-hello && sleep 15"], workers=2, image=USER_IMAGE,
                      resources_per_worker={"cpu": "300m", "memory": "300Mi"}, launcher_resources={"cpu": "200m", "memory": "256Mi"})
    try:
        job = client.wait_for_job(name, phases=["Running"], timeout=180)
        assert job.runtime == "mpi-openmpi" and job.workers == 2
        pods = client._backend._api._core.list_namespaced_pod("team-a", label_selector=f"jobset.sigs.k8s.io/jobset-name={name}").items
        roles = {}
        for p in pods:
            c = p.spec.containers[0]
            role = p.metadata.labels["jobset.sigs.k8s.io/replicatedjob-name"]
            roles[role] = roles.get(role, 0) + 1
            assert c.image == USER_IMAGE, (p.metadata.name, c.image)
            want = ("300m", "300Mi") if role == "node" else ("200m", "256Mi")
            for side in (c.resources.requests, c.resources.limits):
                assert (side["cpu"], side["memory"]) == want, (p.metadata.name, side)
        assert roles == {"node": 2, "launcher": 1}, roles
        assert client.wait_for_job(name, timeout=180).status.phase == "Succeeded"
        assert "allreduce over 2 ranks ok" in client.get_logs(name)
        rt = client._backend._api._custom.get_namespaced_custom_object("trainer.kubeflow.org", "v1alpha1", "team-a", "trainingruntimes", name)
        assert rt["metadata"]["ownerReferences"][0]["kind"] == "TrainJob"
        assert name not in [r.name for r in client.list_runtimes()]
    finally:
        client.delete_job(name, wait=True, timeout=120)
    _wait_gone(client, name)


def test_tenant_isolation(kubeconfig_path):
    dev_b = MPIJobClient(namespace="team-a", context="dev-b", config_file=kubeconfig_path)
    with pytest.raises(PermissionDeniedError, match='"dev-b" cannot list'):
        dev_b.list_jobs()
    viewer = MPIJobClient(namespace="team-a", context="viewer-a", config_file=kubeconfig_path)
    viewer.list_jobs()
    with pytest.raises(PermissionDeniedError, match='"viewer-a" cannot create'):
        viewer.create_job("nope", command=None, workers=1)


def test_runtimes_and_convert(kubeconfig_path):
    client = MPIJobClient(namespace="team-a", context="dev-a", config_file=kubeconfig_path)
    names = [r.name for r in client.list_runtimes()]
    assert {"mpi-openmpi", "mpi-openmpi-gpu", "mpi-mpich", "mpi-intel"} <= set(names)
    out = client.convert_legacy({
        "apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": "legacy"},
        "spec": {"slotsPerWorker": 2, "mpiReplicaSpecs": {
            "Launcher": {"template": {"spec": {"containers": [{"name": "l", "image": "ghcr.io/mpijob/openmpi:4.1", "command": ["mpirun", "hostname"]}]}}},
            "Worker": {"replicas": 3, "template": {"spec": {"containers": [{"name": "w", "image": "ghcr.io/mpijob/openmpi:4.1"}]}}}}}})
    assert out["runtime"] is None
    assert out["trainJob"]["spec"]["trainer"]["numNodes"] == 3
    assert {"field": "spec.slotsPerWorker", "action": "mapped", "detail": "2 → spec.trainer.numProcPerNode"} in out["notes"]


def test_follow_all_pods(kubeconfig_path, namespace):
    """get_logs(worker="all", follow=True) yields each new line once, as the job prints it, and ends with the job."""
    client = MPIJobClient(namespace=namespace, context="admin", config_file=kubeconfig_path)
    client.create_job("tick", command=["sh", "-c", "for i in 1 2 3 4 5; do echo tick $i; sleep 1; done"], workers=1)
    client.wait_for_job("tick", phases=["Running"], timeout=120)
    lines = list(client.get_logs("tick", worker="all", follow=True, grep="^tick"))
    assert lines == [f"[launcher] tick {i}" for i in range(1, 6)], lines


def test_logs_from_the_store_once_the_pods_are_gone(kubeconfig_path):
    """The job's pods go (as JobSet removes them, or a drain): get_logs reads the log store as
    the user, says so, and the status keeps the pods and transitions; dev-b reads none of it."""
    client = MPIJobClient(namespace="team-a", context="dev-a", config_file=kubeconfig_path)
    name = unique("sdk-kept")
    client.create_job(name, command=None, workers=2, slots_per_worker=2)
    try:
        client.wait_for_job(name, timeout=240)
        live = client.get_logs(name)
        assert "allreduce over 4 ranks ok" in live and client.last_log_sources == {"launcher": "pod"}
        # The log store has every rank's lines before the pods go (its
        # collector reads the nodes' log files every second).
        for _ in range(60):
            if len(set(re.findall(r"mpi-hello: rank (\d) of 4 on", client.get_logs(name, source="store")))) == 4:
                break
            time.sleep(1)
        admin = k8s.CoreV1Api(k8s_config.new_client_from_config(config_file=kubeconfig_path, context="admin"))
        admin.delete_collection_namespaced_pod("team-a", label_selector=f"jobset.sigs.k8s.io/jobset-name={name}", grace_period_seconds=0)
        for _ in range(60):
            if not admin.list_namespaced_pod("team-a", label_selector=f"jobset.sigs.k8s.io/jobset-name={name}").items:
                break
            time.sleep(1)
        stored = client.get_logs(name)
        assert client.last_log_sources == {"launcher": "log store"}
        assert sorted(re.findall(r"\[1,(\d)\]<stdout>:mpi-hello: rank \d of 4 on", stored)) == ["0", "1", "2", "3"], stored
        assert client.get_logs(name, rank=3).count("mpi-hello: rank 3 of 4 on ") == 1
        assert set(client.last_log_sources.values()) == {"log store"}
        st = client.get_job(name).status
        assert [(p.role, p.index) for p in st.pods] == [("launcher", 0), ("worker", 0), ("worker", 1)], st.pods
        assert st.history and st.history[-1].phase == "Succeeded", st.history
        other = MPIJobClient(namespace="team-a", context="dev-b", config_file=kubeconfig_path)
        with pytest.raises(PermissionDeniedError):
            other.get_logs(name, source="store")
    finally:
        client.delete_job(name)


def test_suspend_and_resume(kubeconfig_path, namespace):
    """A job outside Kueue is suspended and resumed through its spec.suspend (the CLI's e2e covers Kueue's way)."""
    client = MPIJobClient(namespace=namespace, context="admin", config_file=kubeconfig_path)
    client.create_job("hold", command=["sleep", "600"], workers=1)

    def phase_becomes(want, timeout=180):
        deadline, phase = time.monotonic() + timeout, None
        while time.monotonic() < deadline:
            phase = client.get_job("hold").status.phase
            if phase == want:
                return
            time.sleep(1)
        raise AssertionError(f"job hold is {phase}, not {want}, after {timeout}s")

    phase_becomes("Running")
    assert client.suspend_job("hold") == "suspended (spec.suspend true)"
    assert client.get_job("hold").raw["spec"]["suspend"] is True
    phase_becomes("Suspended", timeout=90)
    assert client.resume_job("hold") == "resumed (spec.suspend false)"
    phase_becomes("Running")
    with pytest.raises(JobNotFoundError, match="did you mean 'hold'"):
        client.suspend_job("hodl")
    client.delete_job("hold", wait=False)


def test_the_whole_job_at_create_time(kubeconfig_path):
    """create_job's timeout, tolerations, image pull Secrets, description and launcher flags reach the
    pods and the status; the timeout stops the job as DeadlineExceeded; a bad value is refused naming
    the argument before anything is made."""
    client = MPIJobClient(namespace="team-a", context="dev-a", config_file=kubeconfig_path)
    with pytest.raises(InvalidJobError) as e:
        client.create_job(unique("sdk-bad"), command=None, workers=1, timeout="90")
    assert e.value.field == "timeout" and "is not a duration" in str(e.value)
    with pytest.raises(InvalidJobError, match="no queue"):
        client.create_job(unique("sdk-bad"), command=None, workers=1, priority="high")
    name = unique("sdk-whole")
    client.create_job(name, command=["mpirun", "sh", "-c", "sleep 600"], workers=1, timeout="30s",
                      tolerations=["mpijob.dev/e2e=yes:NoSchedule"], image_pull_secrets="sdk-regcred",
                      description="from the SDK", launcher_flags="--bind-to none")
    try:
        client.wait_for_job(name, phases=["Running"], timeout=180)
        pods = client._backend._api._core.list_namespaced_pod("team-a", label_selector=f"jobset.sigs.k8s.io/jobset-name={name}").items
        assert len(pods) == 2, [p.metadata.name for p in pods]
        for p in pods:
            assert any(t.key == "mpijob.dev/e2e" and t.value == "yes" and t.effect == "NoSchedule" for t in p.spec.tolerations), p.spec.tolerations
            assert [s.name for s in p.spec.image_pull_secrets] == ["sdk-regcred"]
            if p.metadata.labels["jobset.sigs.k8s.io/replicatedjob-name"] == "launcher":
                assert p.spec.containers[0].command[:3] == ["mpirun", "--bind-to", "none"], p.spec.containers[0].command
        job = client.get_job(name)
        assert job.raw["metadata"]["annotations"]["mpijob.dev/description"] == "from the SDK"
        assert job.raw["spec"]["activeDeadlineSeconds"] == 30
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and client.get_job(name).status.phase != "Failed":
            time.sleep(1)
        got = client.get_job(name).status
        assert (got.phase, got.reason) == ("Failed", "DeadlineExceeded"), (got.phase, got.reason, got.message)
        assert "timeout of 30s" in got.message
    finally:
        client.delete_job(name, wait=False)


_HANG = """import numpy as np
from mpi4py import MPI
comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
def wait_for_peer():
    return comm.recv(source=0, tag=99)
def step():
    comm.Allreduce(np.ones(4), np.empty(4), op=MPI.SUM)
print("rank", rank, "starting", flush=True)
if rank == size - 1:
    wait_for_peer()
else:
    step()
"""


def test_get_stacks_of_a_hung_job(kubeconfig_path):
    """dev-a takes the stacks of a job whose last rank waits in recv while the others allreduce;
    dev-b cannot; the job runs on."""
    import base64
    import time

    from mpijob import MPIJobError, PermissionDeniedError
    client = MPIJobClient(namespace="team-a", context="dev-a", config_file=kubeconfig_path)
    name = unique("sdk-stacks")
    script = base64.b64encode(_HANG.encode()).decode()
    client.create_job(name, command=["mpirun", "sh", "-c", f"echo {script} | base64 -d > /tmp/hang.py && exec python3 /tmp/hang.py"],
                      workers=2, slots_per_worker=2)
    try:
        client.wait_for_job(name, phases=("Running",), timeout=180)
        deadline, s = time.monotonic() + 120, None
        while time.monotonic() < deadline:
            try:
                s = client.get_stacks(name)
            except MPIJobError:
                s = None
            if s and len(s.ranks) == 4 and len(s.groups) == 2:
                break
            time.sleep(3)
        assert s and len(s.groups) == 2, s
        assert (s.groups[0].rank_text, s.groups[0].callee, s.groups[0].where) == ("0-2", "comm.Allreduce", "hang.py:8 step()"), s.groups[0]
        assert (s.groups[1].rank_text, s.groups[1].callee, s.groups[1].pods) == ("3", "comm.recv", "Worker 1"), s.groups[1]
        assert s.contrast == "rank 3 waits in comm.recv while ranks 0-2 wait in comm.Allreduce"
        assert "comm.Allreduce(np.ones(4), np.empty(4), op=MPI.SUM)" in str(s)
        assert client.get_job(name).status.phase == "Running"
        other = MPIJobClient(namespace="team-a", context="dev-b", config_file=kubeconfig_path)
        with pytest.raises((PermissionDeniedError, JobNotFoundError)):
            other.get_stacks(name)
    finally:
        client.delete_job(name, wait=False)
