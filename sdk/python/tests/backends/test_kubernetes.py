"""The Kubernetes backend (mpijob.backends.kubernetes) over stand-ins of the official client's APIs."""

import copy
import json
from datetime import datetime, timezone
from typing import Any, ClassVar

import pytest
import yaml
from support import REPO, RUNTIME_NOT_SEEN, _FlakyCustom, _offline_client, _RecordingCustom, _trainjob

from mpijob import (
    InvalidJobError,
    JobFailedError,
    MPIJob,
    MPIJobClient,
)


def test_create_waits_for_trainer_to_see_the_jobs_runtime(monkeypatch):
    monkeypatch.setattr("time.sleep", lambda s: None)
    from mpijob import jobspec
    rt = {"metadata": {"name": "j", "labels": {jobspec.JOB_LABEL: "j"}}}
    tj = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "j", "namespace": "team-a"}, "spec": {}}
    custom = _FlakyCustom(refusals=2)
    job = _offline_client(custom)._backend._create(jobspec.Job(train_job=tj, runtime=rt), dry_run=False)
    assert job.name == "j"
    assert custom.calls == ["trainingruntimes", "trainjobs", "trainjobs", "trainjobs", "patch trainingruntimes"]


def test_create_does_not_retry_other_refusals(monkeypatch):
    monkeypatch.setattr("time.sleep", lambda s: None)
    from mpijob import jobspec
    rt = {"metadata": {"name": "j", "labels": {jobspec.JOB_LABEL: "j"}}}
    tj = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "j", "namespace": "team-a"}, "spec": {}}
    custom = _FlakyCustom(refusals=0, other=next(v["error"] for v in RUNTIME_NOT_SEEN if not v["retry"]))
    with pytest.raises(Exception) as e:
        _offline_client(custom)._backend._create(jobspec.Job(train_job=tj, runtime=rt), dry_run=False)
    assert "numNodes" in str(e.value)
    assert custom.calls == ["trainingruntimes", "trainjobs", "delete trainingruntimes"]


def test_env_from_secret_keeps_the_value_out_of_the_job(monkeypatch):
    custom = _RecordingCustom()
    c = _offline_client(custom)
    c.create_job("s3", ["mpirun", "train"], workers=2, env={"BUCKET": "data", "TOKEN": "plain"},
                 env_from_secret={"AWS_SECRET_ACCESS_KEY": "s3-credentials:secret-key", "TOKEN": "api"})
    assert custom.created["trainjobs"]["spec"]["trainer"]["env"] == [
        {"name": "BUCKET", "value": "data"},
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "api", "key": "TOKEN"}}},
        {"name": "AWS_SECRET_ACCESS_KEY", "valueFrom": {"secretKeyRef": {"name": "s3-credentials", "key": "secret-key"}}},
    ]


def test_the_whole_job_at_create_time():
    custom = _RecordingCustom()
    c = _offline_client(custom)
    c.create_job("sched", ["mpirun", "python3", "train.py"], workers=2, queue="default", timeout="1h30m", retries=2, priority="high",
                 tolerations=["dedicated=mpi:NoSchedule", {"key": "spot", "operator": "Exists"}], image_pull_secrets="regcred",
                 description="nightly", launcher_flags="--bind-to none", end_stuck_after="30m")
    tj = custom.created["trainjobs"]
    assert tj["metadata"]["annotations"]["policy.mpijob.dev/end-stuck-after"] == "30m"
    assert tj["spec"]["activeDeadlineSeconds"] == 5400
    assert tj["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "high"
    assert tj["metadata"]["annotations"]["mpijob.dev/description"] == "nightly"
    assert tj["spec"]["trainer"]["command"] == ["mpirun", "--bind-to", "none", "python3", "train.py"]
    pod = tj["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]
    assert pod["tolerations"] == [{"key": "dedicated", "operator": "Equal", "value": "mpi", "effect": "NoSchedule"}, {"key": "spot", "operator": "Exists"}]
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]
    # The retries beside the runtime's rule that fails a job mpijob-manager ended.
    assert custom.created["trainingruntimes"]["spec"]["template"]["spec"]["failurePolicy"] == {
        "maxRestarts": 2, "rules": [{"name": "EndedByMPIJobManager", "action": "FailJobSet", "onJobFailureReasons": ["DeadlineExceeded"]}]}


def test_a_model_registered_when_the_job_succeeds():
    import base64

    from kubernetes import client as k

    class _Secrets:
        def read_namespaced_secret(self, name, namespace):
            data = {"AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "s", "AWS_S3_ENDPOINT": "http://s3", "AWS_S3_BUCKET": "team-a"}
            return k.V1Secret(metadata=k.V1ObjectMeta(name=name, labels={"opendatahub.io/dashboard": "true"},
                                                      annotations={"opendatahub.io/connection-type": "s3"}),
                              data={key: base64.b64encode(v.encode()).decode() for key, v in data.items()})

    custom = _RecordingCustom()
    c = _offline_client(custom, _Secrets())
    c.create_job("train", ["mpirun", "python3", "t.py"], workers=2, data_connection="s3", register_model="digits:v3",
                 register_artifact="model.onnx")
    ann = custom.created["trainjobs"]["metadata"]["annotations"]
    assert ann["mpijob.dev/register-model"] == "digits:v3" and ann["mpijob.dev/register-artifact"] == "model.onnx"


@pytest.mark.parametrize("kwargs,field,text", [
    ({"timeout": 90}, "timeout", "give a string"),
    ({"retries": "2"}, "retries", "use an integer"),
    ({"tolerations": [3]}, "tolerations", "is no toleration"),
    ({"launcher_flags": 5}, "launcher_flags", "give a string"),
    ({"tolerations": ["a=b:Never"]}, "tolerations", "the effect"),
    ({"launcher_flags": "--bind-to none", "command": ["python3", "t.py"]}, "launcher_flags", 'starts with "python3"'),
    ({"end_stuck_after": "soon"}, "end_stuck_after", "is not a grace period"),
    ({"end_stuck_after": 30}, "end_stuck_after", "give a string"),
    ({"register_model": "my model:v1", "data_connection": "s3"}, "register_model", '(model name) "my model"'),
    ({"register_model": "digits:v 1", "data_connection": "s3"}, "register_model", '(version) "v 1"'),
    ({"register_model": "digits:v1"}, "register_model", "reads it from the job's data connection"),
    ({"register_artifact": "model.onnx", "data_connection": "s3"}, "register_artifact", "give register_model"),
])
def test_bad_settings_name_the_argument(kwargs, field, text):
    c = _offline_client(_RecordingCustom())
    args = {"command": ["mpirun", "t"], **kwargs}
    with pytest.raises(InvalidJobError) as e:
        c.create_job("bad", workers=1, **args)
    assert e.value.field == field and text in str(e.value), (e.value.field, str(e.value))


def _k8s_event(kind, name, reason, message, ts, type_="Normal", count=1):
    from kubernetes import client as k
    return k.CoreV1Event(involved_object=k.V1ObjectReference(kind=kind, name=name), reason=reason, message=message,
                         type=type_, count=count, last_timestamp=ts, metadata=k.V1ObjectMeta(name=f"{name}.{reason}"))


class _FakeCore:
    def __init__(self, events):
        self.events = events

    def list_namespaced_event(self, namespace):
        from kubernetes import client as k
        return k.CoreV1EventList(items=list(self.events))


def test_get_events_keeps_the_jobs_own_oldest_first():
    t0 = datetime(2026, 11, 22, 10, 0, tzinfo=timezone.utc)
    from datetime import timedelta
    c = _offline_client(None)
    c._backend._api._core = _FakeCore([
        _k8s_event("Pod", "hello-node-0-1-abcde", "Started", "Started container node", t0 + timedelta(seconds=5)),
        _k8s_event("Pod", "hello-4-node-0-0-abcde", "Started", "not hello's", t0),
        _k8s_event("TrainJob", "hello", "Running", "Running on 2 Workers.", t0 + timedelta(seconds=9)),
        _k8s_event("Workload", "trainjob-hello-8f2k1", "QuotaReserved", "Quota reserved", t0 + timedelta(seconds=1)),
        _k8s_event("TrainJob", "hello-4", "Running", "not hello's either", t0),
    ])
    got = [(e.kind, e.object, e.reason) for e in c.get_events("hello")]
    assert got == [("Workload", "trainjob-hello-8f2k1", "QuotaReserved"), ("Pod", "hello-node-0-1-abcde", "Started"),
                   ("TrainJob", "hello", "Running")]


class _FakeWatch:
    """k8s_watch.Watch stand-in: the first stream yields the given TrainJob states."""
    states: ClassVar[list[Any]] = []

    def stream(self, *args, **kwargs):
        states, _FakeWatch.states = _FakeWatch.states, []
        for st in states:
            yield {"type": "MODIFIED", "object": _trainjob(st)}

    def stop(self):
        pass


def test_watch_yields_phases_progress_and_events(monkeypatch):
    t0 = datetime(2026, 11, 22, 10, 0, tzinfo=timezone.utc)
    c = _offline_client(_RecordingCustom())
    c._backend._api._core = _FakeCore([_k8s_event("Pod", "hello-node-0-0-abcde", "Pulled", "image pulled", t0),
                         _k8s_event("Pod", "hello-4-node-0-0-abcde", "Pulled", "not hello's", t0)])
    monkeypatch.setattr(c._backend, "get_job", lambda name: MPIJob.from_trainjob(_trainjob(None)))
    _FakeWatch.states = [
        None,  # the manager has not written yet: no phase guessed
        {"phase": "Pending", "message": "", "workersTotal": 2},  # no message: not yielded
        {"phase": "GangScheduling", "message": "Waiting for 1 Worker to be scheduled.", "workersReady": 0, "workersTotal": 2},
        {"phase": "Starting", "message": "Workers are starting.", "workersReady": 1, "workersTotal": 2},
        {"phase": "Starting", "message": "Workers are starting.", "workersReady": 1, "workersTotal": 2},  # nothing new
        {"phase": "Running", "message": "Running on 2 Workers.", "workersReady": 2, "workersTotal": 2},
        {"phase": "Succeeded", "message": "The Launcher completed.", "workersReady": 0, "workersTotal": 2},
    ]
    monkeypatch.setattr("mpijob.backends.kube_api.k8s_watch.Watch", _FakeWatch)
    got = [(ev.kind, ev.message) for ev in c.watch("hello", timeout=30)]
    assert got == [
        ("submitted", "job hello on runtime mpi-openmpi"),
        ("scheduling", "Waiting for 1 Worker to be scheduled."),
        ("scheduling", "Workers are starting."),
        ("progress", "Workers ready 1/2"),
        ("running", "Running on 2 Workers."),
        ("progress", "Workers ready 2/2"),
        ("completed", "The Launcher completed."),
        ("event", "Normal Pulled (Pod hello-node-0-0-abcde): image pulled"),
    ]


class _DeleteRecorder(_FlakyCustom):
    def __init__(self):
        super().__init__(refusals=0)
        self.deleted = []

    def delete_namespaced_custom_object(self, group, version, namespace, plural, name, body=None):
        self.deleted.append((plural, name, body.grace_period_seconds))


class _PodDeleter:
    def __init__(self):
        self.calls = []

    def delete_collection_namespaced_pod(self, namespace, label_selector, grace_period_seconds):
        self.calls.append((namespace, label_selector, grace_period_seconds))


@pytest.mark.parametrize("grace,pods", [(0, [("team-a", "jobset.sigs.k8s.io/jobset-name=hello", 0)]), (5, [("team-a", "jobset.sigs.k8s.io/jobset-name=hello", 5)]), (None, [])])
def test_delete_grace_period_reaches_the_pods(grace, pods):
    custom, core = _DeleteRecorder(), _PodDeleter()
    c = _offline_client(custom)
    c._backend._api._core = core
    c.delete_job("hello", grace_period=grace, wait=False)
    assert custom.deleted == [("trainjobs", "hello", grace)]
    assert core.calls == pods


class _Cluster:
    """Stand-ins of CustomObjectsApi and CoreV1Api over a few objects in team-a: enough for
    the public methods' mocked-API tests (no cluster)."""

    def __init__(self, jobs=(), pods=(), logs=None):
        self.jobs = {j["metadata"]["name"]: j for j in jobs}
        self.runtimes = {n: yaml.safe_load((REPO / "config" / "runtimes" / f"{n}.yaml").read_text())
                         for n in ("mpi-openmpi", "mpi-openmpi-gpu", "mpi-intel")}
        self.pods, self.logs, self.created = list(pods), dict(logs or {}), []

    # CustomObjectsApi
    def get_namespaced_custom_object(self, group, version, namespace, plural, name):
        from kubernetes.client.rest import ApiException
        if plural == "trainjobs" and name in self.jobs:
            return self.jobs[name]
        raise ApiException(status=404, reason="Not Found")

    def list_namespaced_custom_object(self, group, version, namespace, plural, **kwargs):
        return {"items": list(self.jobs.values())}

    def get_cluster_custom_object(self, group, version, plural, name):
        from kubernetes.client.rest import ApiException
        if name in self.runtimes:
            return self.runtimes[name]
        raise ApiException(status=404, reason="Not Found")

    def list_cluster_custom_object(self, group, version, plural):
        return {"items": list(self.runtimes.values())}

    def create_namespaced_custom_object(self, group, version, namespace, plural, body, **kwargs):
        self.created.append((plural, body))
        return {**body, "metadata": {**body["metadata"], "uid": "u-" + body["metadata"]["name"]}}

    def create_namespaced_custom_object_with_http_info(self, *args, **kwargs):
        return self.create_namespaced_custom_object(*args, **kwargs), 201, {}

    def patch_namespaced_custom_object(self, *args):
        pass

    # CoreV1Api
    def list_namespaced_pod(self, namespace, label_selector):
        from kubernetes import client as k
        job = label_selector.split("=", 1)[1]
        return k.V1PodList(items=[p for p in self.pods if p.metadata.labels["jobset.sigs.k8s.io/jobset-name"] == job])

    def read_namespaced_pod_log(self, name, namespace, **kwargs):
        return self.logs[name]


def _pod(job, role, index, created="2026-11-22T10:00:00Z"):
    from kubernetes import client as k
    return k.V1Pod(metadata=k.V1ObjectMeta(name=f"{job}-{role}-0-{index}-abcde", labels={
        "jobset.sigs.k8s.io/jobset-name": job, "jobset.sigs.k8s.io/replicatedjob-name": role,
        "batch.kubernetes.io/job-completion-index": str(index)}, creation_timestamp=datetime.fromisoformat(created.replace("Z", "+00:00"))))


def _status_job(name, status, runtime="mpi-openmpi", labels=None):
    tj = _trainjob(status)
    tj["metadata"]["name"] = name
    tj["spec"]["runtimeRef"]["name"] = runtime
    if labels:
        tj["metadata"]["labels"] = labels
    return tj


def test_get_and_list_jobs_and_runtimes_on_a_mocked_api():
    cluster = _Cluster(jobs=[_status_job("a", {"phase": "Running", "message": "Running on 2 Workers.", "workersReady": 2, "workersTotal": 2}),
                             _status_job("b", {"phase": "Failed", "reason": "WorkerOOMKilled", "message": "m"}, runtime="mpi-openmpi-gpu")])
    c = _offline_client(cluster, cluster)
    job = c.get_job("a")
    assert (job.name, job.status.phase, job.status.workers_ready) == ("a", "Running", 2)
    assert [j.name for j in c.list_jobs()] == ["a", "b"]
    assert [j.name for j in c.list_jobs(phase="Failed")] == ["b"]
    assert [j.name for j in c.list_jobs(runtime="mpi-openmpi")] == ["a"]
    assert [r.name for r in c.list_runtimes()] == ["mpi-intel", "mpi-openmpi", "mpi-openmpi-gpu"]
    from mpijob import JobNotFoundError
    with pytest.raises(JobNotFoundError) as e:
        c.get_job("aa")
    assert e.value.suggestion == "a"
    with pytest.raises(InvalidJobError) as e2:
        c.create_job("x", None, workers=1, runtime="mpi-openmp")
    assert e2.value.field == "runtime" and "did you mean 'mpi-openmpi'" in str(e2.value)


class _StatusCluster(_Cluster):
    """TrainJobs and the JobStatuses mpijob-manager writes beside them (Go: pkg/api/jobstatus.go)."""

    def __init__(self, jobs, statuses):
        super().__init__(jobs=jobs)
        self.statuses = {s["metadata"]["name"]: s for s in statuses}

    def get_namespaced_custom_object(self, group, version, namespace, plural, name):
        from kubernetes.client.rest import ApiException
        if plural == "jobstatuses":
            assert group == "mpijob.dev"
            if name in self.statuses:
                return self.statuses[name]
            raise ApiException(status=404, reason="Not Found")
        return super().get_namespaced_custom_object(group, version, namespace, plural, name)

    def list_namespaced_custom_object(self, group, version, namespace, plural, **kwargs):
        if plural == "jobstatuses":
            return {"items": list(self.statuses.values())}
        return super().list_namespaced_custom_object(group, version, namespace, plural, **kwargs)


def _job_status(name, owner_uid, status):
    return {"apiVersion": "mpijob.dev/v1alpha1", "kind": "JobStatus",
            "metadata": {"name": name, "namespace": "team-a",
                         "ownerReferences": [{"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "name": name, "uid": owner_uid}]},
            "phase": status["phase"], "status": json.dumps(status)}


JOIN = json.loads((REPO / "pkg/api/testdata/join-status.json").read_text())


@pytest.mark.parametrize("v", JOIN["vectors"], ids=[v["name"] for v in JOIN["vectors"]])
def test_join_status_runs_gos_vectors(v):
    # The vectors Go's api.JoinStatus is tested with: the same job joins the same JobStatus the same way.
    from mpijob.backends.kube_api import join_status
    job = {"metadata": copy.deepcopy(v["job"])}
    shared = job["metadata"].get("annotations")
    before = copy.deepcopy(shared)
    assert join_status(job, v["jobStatus"]) == v["joined"]
    assert (job["metadata"].get("annotations") or {}) == v["annotations"]
    assert shared == before  # the dict the job came with (a cache's) is never changed


def test_the_status_comes_from_the_jobs_jobstatus():
    # "a": its JobStatus says Running; the annotation an older manager wrote says Pending.
    # "b": the JobStatus left by an earlier job of the name (another UID) is not its own.
    a = _status_job("a", {"phase": "Pending", "message": "old"})
    a["metadata"]["uid"] = "uid-a"
    b = _status_job("b", {"phase": "Queued", "message": "waits"})
    b["metadata"]["uid"] = "uid-b2"
    cluster = _StatusCluster([a, b], [
        _job_status("a", "uid-a", {"phase": "Running", "message": "Running on 2 Workers.", "workersReady": 2, "workersTotal": 2}),
        _job_status("b", "uid-b1", {"phase": "Failed", "reason": "Forged", "message": "x"})])
    c = _offline_client(cluster, cluster)
    job = c.get_job("a")
    assert (job.status.phase, job.status.workers_ready, job.status.message) == ("Running", 2, "Running on 2 Workers.")
    assert {j.name: j.status.phase for j in c.list_jobs()} == {"a": "Running", "b": "Queued"}
    assert c.get_job("b").status.phase == "Queued"


def test_get_logs_merges_redacts_and_greps_on_a_mocked_api():
    pods = [_pod("a", "launcher", 0), _pod("a", "node", 0), _pod("a", "node", 1)]
    logs = {"a-launcher-0-0-abcde": "2026-11-22T10:00:00.300Z start password=hunter2\n2026-11-22T10:00:00.500Z rank 0 done\n",
            "a-node-0-0-abcde": "2026-11-22T10:00:00.100Z sshd up\n",
            "a-node-0-1-abcde": "2026-11-22T10:00:00.400Z rank 1 done\n"}
    cluster = _Cluster(jobs=[_status_job("a", {"phase": "Succeeded", "message": "done"})], pods=pods, logs=logs)
    c = _offline_client(cluster, cluster)
    assert c.get_logs("a") == "start password=[REDACTED]\nrank 0 done\n"
    assert c.get_logs("a", worker="all") == ("[worker-0] sshd up\n[launcher] start password=[REDACTED]\n"
                                            "[worker-1] rank 1 done\n[launcher] rank 0 done\n")
    assert c.get_logs("a", worker="all", grep=r"rank \d") == "[worker-1] rank 1 done\n[launcher] rank 0 done\n"
    assert c.get_logs("a", worker=1) == "rank 1 done\n"
    from mpijob import JobNotFoundError
    with pytest.raises(JobNotFoundError, match=r"has 2 Workers \(0 to 1\)"):
        c.get_logs("a", worker=5)
    assert c.last_log_sources == {"worker-1": "pod"}


def _store_client(cluster, stored):
    """An offline client whose cluster keeps a log store holding ``stored`` (label → lines)."""
    from mpijob.backends import KubernetesAPI, KubernetesBackend

    class StoreAPI(KubernetesAPI):
        def log_store_available(self):
            return stored is not None

        def stored_log(self, job, role, index=None, since_seconds=None, end=None):
            label = "launcher" if role == "launcher" else f"worker-{index}"
            lines = [ln for ln in stored.get(label, "").splitlines() if end is None or ln.split(" ")[0] < end]
            return "".join(ln + "\n" for ln in lines)

    return MPIJobClient(backend=KubernetesBackend(StoreAPI("team-a", cluster, cluster)))


def test_get_logs_reads_the_log_store_once_pods_are_gone():
    from mpijob import JobNotFoundError
    job = _status_job("a", {"phase": "Succeeded", "message": "done"})
    job["spec"]["trainer"] = {"numNodes": 2}
    stored = {"launcher": "2026-11-22T10:00:00.300Z [1,0]<stdout>:start password=hunter2\n2026-11-22T10:00:00.500Z [1,1]<stdout>:rank 1 done",
              "worker-0": "2026-11-22T10:00:00.100Z sshd up",
              "worker-1": "2026-11-22T10:00:00.400Z sshd up too"}
    c = _store_client(_Cluster(jobs=[job], pods=[], logs={}), stored)
    assert c.get_logs("a") == "[1,0]<stdout>:start password=[REDACTED]\n[1,1]<stdout>:rank 1 done\n"
    assert c.last_log_sources == {"launcher": "log store"}
    assert c.get_logs("a", worker="all") == ("[worker-0] sshd up\n[launcher] [1,0]<stdout>:start password=[REDACTED]\n"
                                            "[worker-1] sshd up too\n[launcher] [1,1]<stdout>:rank 1 done\n")
    assert c.get_logs("a", rank=1) == "[1,1]<stdout>:rank 1 done\n"
    assert c.get_logs("a", tail=1) == "[1,1]<stdout>:rank 1 done\n"
    assert c.get_logs("a", worker=1) == "sshd up too\n"
    with pytest.raises(JobNotFoundError, match="keeps no log store"):
        c.get_logs("a", source="pods")
    with pytest.raises(InvalidJobError) as e:
        c.get_logs("a", source="stor")
    assert e.value.field == "source" and "use 'auto', 'pods' or 'store'" in str(e.value)
    with pytest.raises(InvalidJobError, match="drop follow=True"):
        c.get_logs("a", source="store", follow=True)
    nostore = _store_client(_Cluster(jobs=[job], pods=[], logs={}), None)
    with pytest.raises(JobNotFoundError, match="this cluster keeps no log store to read once pods are gone"):
        nostore.get_logs("a")
    with pytest.raises(JobNotFoundError, match="source='store': this cluster keeps no log store"):
        nostore.get_logs("a", source="store")


def test_get_logs_puts_rotated_lines_from_the_store_first():
    pods = [_pod("a", "launcher", 0)]
    logs = {"a-launcher-0-0-abcde": "2026-11-22T10:00:05.000Z still here\n"}
    stored = {"launcher": "2026-11-22T10:00:00.000Z rotated away\n2026-11-22T10:00:05.000Z still here"}
    c = _store_client(_Cluster(jobs=[_status_job("a", {"phase": "Running", "message": "m"})], pods=pods, logs=logs), stored)
    assert c.get_logs("a") == "rotated away\nstill here\n"
    assert c.last_log_sources == {"launcher": "log store, then pod"}
    assert c.get_logs("a", source="pods") == "still here\n"
    assert c.get_logs("a", tail=1) == "still here\n"


def test_get_logs_by_rank_on_a_mocked_api(offline_client):
    pods = [_pod("a", "launcher", 0), _pod("a", "node", 0)]
    logs = {"a-launcher-0-0-abcde": ("2026-11-22T10:00:00.100Z [1,0]<stdout>:rank 0 up\n"
                                     "2026-11-22T10:00:00.200Z [1,1]<stdout>:[rank 1] up\n"
                                     "2026-11-22T10:00:00.300Z mpirun: a line of its own\n"
                                     "2026-11-22T10:00:00.400Z [1,2]<stderr>:RuntimeError: token=abc123\n")}
    cluster = _Cluster(jobs=[_status_job("a", {"phase": "Running", "message": "m"})], pods=pods, logs=logs)
    c = _offline_client(cluster, cluster)
    assert c.get_logs("a", rank=1) == "[1,1]<stdout>:[rank 1] up\n"
    assert c.get_logs("a", rank="1-2") == "[1,1]<stdout>:[rank 1] up\n[1,2]<stderr>:RuntimeError: token=[REDACTED]\n"
    assert c.get_logs("a", rank="7") == ""
    with pytest.raises(InvalidJobError) as e:
        c.get_logs("a", rank="one")
    assert e.value.field == "rank" and "give a rank number" in str(e.value)
    with pytest.raises(InvalidJobError, match="goes with worker=None"):
        c.get_logs("a", rank=1, worker="all")
    with pytest.raises(InvalidJobError, match="rank=True"):
        offline_client.get_logs("a", rank=True)


def test_wait_for_job_on_a_mocked_api(monkeypatch):
    monkeypatch.setattr("time.sleep", lambda s: None)
    cluster = _Cluster(jobs=[_status_job("ok", {"phase": "Succeeded", "message": "done"}),
                             _status_job("bad", {"phase": "Failed", "reason": "WorkerOOMKilled", "message": "Worker 1 ran out of memory.",
                                                 "nextStep": "See `kubectl mpijob logs bad --all`.",
                                                 "steps": [{"text": "See `kubectl mpijob logs bad --all`.",
                                                            "command": {"verb": "logs", "args": ["bad", "--all"]}}]})])
    c = _offline_client(cluster, cluster)
    assert c.wait_for_job("ok", timeout=5).status.phase == "Succeeded"
    assert c.wait_for_job("ok", phases="Running", timeout=5).name == "ok"  # Running is passed on the way
    with pytest.raises(JobFailedError) as e:
        c.wait_for_job("bad", timeout=5)
    assert "WorkerOOMKilled" in str(e.value) and 'client.get_logs("bad", worker="all")' in str(e.value)


def test_clone_job_on_a_mocked_api():
    cluster = _Cluster(jobs=[_status_job("hello", {"phase": "Succeeded", "message": "done"})])
    c = _offline_client(cluster, cluster)
    job = c.clone_job("hello", "hello-4", workers=4, env={"LR": "0.1"})
    assert job.name == "hello-4"
    plural, body = cluster.created[-1]
    assert plural == "trainjobs" and body["spec"]["trainer"]["numNodes"] == 4
    assert body["spec"]["trainer"]["env"] == [{"name": "LR", "value": "0.1"}]
    assert "mpijob.dev/status" not in (body["metadata"].get("annotations") or {})



def test_clone_job_refuses_what_it_cannot_change():
    # The overrides are JobSpec's fields: a typo, or the storage a clone keeps, is refused
    # naming the argument and listing those it takes; nothing is created.
    from mpijob import InvalidJobError
    cluster = _Cluster(jobs=[_status_job("hello", {"phase": "Succeeded", "message": "done"})])
    c = _offline_client(cluster, cluster)
    for bad in ("worker", "pvc", "data_connection"):
        with pytest.raises(InvalidJobError, match=rf"clone_job does not know \['{bad}'\]: use \[.*'workers'") as e:
            c.clone_job("hello", "hello-2", **{bad: 2})
        assert e.value.field == bad
    assert cluster.created == []

class _MetadataClient:
    """A stand-in of the official ApiClient that answers the list of TrainJobs' metadata
    (``PartialObjectMetadataList``) from a _Cluster, as the API server does, and records it;
    any other path (the manager's Lease) is not found."""

    client_side_validation = True

    def __init__(self, cluster, deleted=()):
        self.cluster, self.deleted, self.calls = cluster, set(deleted), []

    def select_header_accept(self, accepts):
        return accepts[0]

    def call_api(self, path, method, path_params=None, query_params=None, header_params=None, **kwargs):
        from kubernetes.client.rest import ApiException
        if not path.endswith("/trainjobs"):
            raise ApiException(status=404, reason="Not Found")
        self.calls.append((path.format(**path_params), header_params["Accept"], kwargs.get("response_type")))
        items = [{"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": j["metadata"]}
                 for j in self.cluster.jobs.values()]
        for name in self.deleted:  # deleted after this list: later reads find nothing
            self.cluster.jobs.pop(name, None)
        return {"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadataList", "items": items}


class _CountingCluster(_Cluster):
    def __init__(self, jobs):
        super().__init__(jobs=jobs)
        self.gets, self.lists = [], 0

    def get_namespaced_custom_object(self, group, version, namespace, plural, name):
        if plural == "trainjobs":
            self.gets.append(name)
        return super().get_namespaced_custom_object(group, version, namespace, plural, name)

    def list_namespaced_custom_object(self, group, version, namespace, plural, **kwargs):
        if plural == "trainjobs":
            self.lists += 1
        return super().list_namespaced_custom_object(group, version, namespace, plural, **kwargs)


def _seen(name, workers=2, runtime="mpi-openmpi", phase="Running", slots=1):
    """A job whose manager status names its runtime, Workers and slots."""
    tj = _status_job(name, {"phase": phase, "message": "m", "runtime": runtime, "workersTotal": workers,
                            "workersReady": workers, "slotsPerWorker": slots}, runtime=runtime,
                      labels={"mpijob.dev/base-runtime": runtime})
    tj["spec"]["trainer"] = {"numNodes": workers, "numProcPerNode": slots}
    return tj


def _unseen(name):
    """A job the manager has not written a status for yet."""
    return _status_job(name, None)


def _row(j):
    return (j.name, j.runtime, j.workers, j.slots_per_worker, j.status.phase, j.status.from_manager)


@pytest.mark.parametrize(("jobs", "deleted", "kwargs", "want_gets", "want_whole_list", "want_raw_kinds"), [
    pytest.param([_seen("b"), _seen("a", workers=3, slots=4, runtime="mpi-intel")], (), {}, [], 0,
                 ["PartialObjectMetadata", "PartialObjectMetadata"], id="every job has the manager's status: metadata only"),
    pytest.param([_seen("a"), _unseen("b")], (), {}, ["b"], 0, ["PartialObjectMetadata", "TrainJob"],
                 id="a job without a status is read whole"),
    pytest.param([_seen("a"), _unseen("b")], ("b",), {}, ["b"], 0, ["PartialObjectMetadata"],
                 id="a job deleted between the list and its read is dropped"),
    pytest.param([_seen("a")] + [_unseen(f"u{i:02d}") for i in range(21)], (), {}, [], 1, ["TrainJob"] * 22,
                 id="more than 20 without a status: whole jobs listed"),
    pytest.param([_seen("a"), _seen("b")], (), {"full": True}, [], 1, ["TrainJob", "TrainJob"],
                 id="full=True lists whole jobs"),
])
def test_list_jobs_reads_metadata_and_the_managers_status(jobs, deleted, kwargs, want_gets, want_whole_list, want_raw_kinds):
    whole = {j["metadata"]["name"]: j for j in jobs}
    cluster = _CountingCluster(jobs)
    api = _MetadataClient(cluster, deleted)
    c = _offline_client(cluster, cluster)
    c._backend._api._api = api
    got = c.list_jobs(**kwargs)
    assert cluster.gets == want_gets
    assert cluster.lists == want_whole_list
    assert len(api.calls) == (0 if kwargs.get("full") else 1)
    for path, accept, response_type in api.calls:
        assert path == "/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs"
        assert accept.startswith("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1")
        assert response_type == "object"
    assert [j.raw["kind"] for j in got] == want_raw_kinds
    # The rows are those read from whole jobs.
    from mpijob import MPIJob as _M
    survivors = [n for n in sorted(whole) if n not in deleted]
    assert [_row(j) for j in got] == [_row(_M.from_trainjob(whole[n])) for n in survivors]


def test_list_jobs_takes_the_workers_from_the_status_where_the_launcher_hosts_ranks():
    # On a runtime whose Launcher hosts ranks a job of numNodes 3 has 2 Workers: the manager's
    # status says so, and the metadata list shows it without reading the runtime.
    import copy
    tj = _seen("a", workers=2, runtime="mpi-ranks-on-launcher")
    tj["spec"]["trainer"]["numNodes"] = 3
    cluster = _CountingCluster([tj])
    rt = copy.deepcopy(cluster.runtimes["mpi-openmpi"])
    rt["metadata"]["name"] = "mpi-ranks-on-launcher"
    rt["spec"]["mlPolicy"]["mpi"]["runLauncherAsNode"] = True
    cluster.runtimes[rt["metadata"]["name"]] = rt
    c = _offline_client(cluster, cluster)
    c._backend._api._api = _MetadataClient(cluster)
    fast, whole = c.list_jobs(), c.list_jobs(full=True)
    assert [_row(j) for j in fast] == [_row(j) for j in whole] == [("a", "mpi-ranks-on-launcher", 2, 1, "Running", True)]


@pytest.mark.parametrize("full", [False, True])
def test_list_jobs_lists_mpi_jobs_only(full):
    # A PyTorch TrainJob in the namespace is left out, whatever status annotation it carries;
    # all_frameworks=True lists it with its framework.
    import copy
    torch = _status_job("bert", {"phase": "Running", "message": "m", "runtime": "torch-distributed", "workersTotal": 2,
                                 "workersReady": 2, "slotsPerWorker": 1}, runtime="torch-distributed")
    cluster = _CountingCluster([_seen("a"), torch])
    rt = copy.deepcopy(cluster.runtimes["mpi-openmpi"])
    rt["metadata"]["name"] = "torch-distributed"
    rt["spec"]["mlPolicy"] = {"torch": {}}
    cluster.runtimes["torch-distributed"] = rt
    c = _offline_client(cluster, cluster)
    c._backend._api._api = _MetadataClient(cluster)
    assert [j.name for j in c.list_jobs(full=full)] == ["a"]
    every = c.list_jobs(full=full, all_frameworks=True)
    assert [(j.name, j.framework) for j in every] == [("a", "mpi"), ("bert", "torch")]


def test_list_jobs_refuses_an_all_frameworks_that_is_not_a_bool():
    c = _offline_client(_Cluster(), _Cluster())
    with pytest.raises(InvalidJobError) as e:
        c.list_jobs(all_frameworks="yes")
    assert e.value.field == "all_frameworks"


@pytest.mark.parametrize("full", ["yes", 1, None])
def test_list_jobs_refuses_a_full_that_is_not_a_bool(full):
    c = _offline_client(_Cluster(), _Cluster())
    with pytest.raises(InvalidJobError) as e:
        c.list_jobs(full=full)
    assert e.value.field == "full" and repr(full) in str(e.value) and "True" in str(e.value)


def test_get_job_names_a_close_job_from_the_metadata_list():
    from mpijob import JobNotFoundError
    cluster = _CountingCluster([_seen("hello"), _unseen("world")])
    c = _offline_client(cluster, cluster)
    api = _MetadataClient(cluster)
    c._backend._api._api = api
    with pytest.raises(JobNotFoundError) as e:
        c.get_job("helo")
    assert e.value.suggestion == "hello" and "did you mean 'hello'" in str(e.value)
    assert (cluster.lists, len(api.calls)) == (0, 1)  # names from metadata, no whole list


class _SuspendCustom:
    """TrainJobs and Kueue Workloads, recording every patch."""

    def __init__(self, labels, workloads):
        self.labels, self.workloads, self.patches = labels, workloads, []

    def get_namespaced_custom_object(self, group, version, namespace, plural, name):
        return {"metadata": {"name": name, "namespace": namespace, "uid": "uid-1", "labels": self.labels}, "spec": {}}

    def list_namespaced_custom_object(self, group, version, namespace, plural, label_selector=""):
        assert (plural, label_selector) == ("workloads", "kueue.x-k8s.io/job-uid=uid-1")
        return {"items": [{"metadata": {"name": n}} for n in self.workloads]}

    def patch_namespaced_custom_object(self, group, version, namespace, plural, name, body):
        self.patches.append((plural, name, body))
        return {}


def test_suspend_and_resume_go_where_they_hold():
    # Outside Kueue: the job's spec.suspend.
    plain = _SuspendCustom({}, [])
    c = _offline_client(plain)
    assert c.suspend_job("hello") == "suspended (spec.suspend true)"
    assert c.resume_job("hello") == "resumed (spec.suspend false)"
    assert plain.patches == [("trainjobs", "hello", {"spec": {"suspend": True}}), ("trainjobs", "hello", {"spec": {"suspend": False}})]
    # Under Kueue: its Workload's spec.active, never the job's spec.suspend (Kueue sets it back).
    queued = _SuspendCustom({"kueue.x-k8s.io/queue-name": "default"}, ["trainjob-hello-1a2b3"])
    said = _offline_client(queued).suspend_job("hello")
    assert said.startswith("suspended through its Kueue Workload trainjob-hello-1a2b3 (spec.active false)")
    assert queued.patches == [("workloads", "trainjob-hello-1a2b3", {"spec": {"active": False}})]
    # Before Kueue made the Workload: a clear error, nothing patched.
    early = _SuspendCustom({"kueue.x-k8s.io/queue-name": "default"}, [])
    with pytest.raises(Exception, match="Workload does not exist yet"):
        _offline_client(early).resume_job("hello")
    assert early.patches == []


class _ClusterWithOwnRuntimes(_Cluster):
    """_Cluster whose namespace team-a has a runtime of its own (a copy of mpi-openmpi), a job's
    per-job runtime, and a PyTorch runtime."""

    def __init__(self):
        super().__init__()
        own = copy.deepcopy(self.runtimes["mpi-openmpi"])
        own["kind"] = "TrainingRuntime"
        own["metadata"] = {"name": "team-mpi", "namespace": "team-a", "annotations": {"mpijob.dev/description": "team A's MPI"}}
        per_job = copy.deepcopy(own)
        per_job["metadata"] = {"name": "job-1", "namespace": "team-a", "labels": {"mpijob.dev/job": "job-1", "mpijob.dev/base-runtime": "mpi-openmpi"}}
        torch = {"kind": "TrainingRuntime", "metadata": {"name": "torch-mine", "namespace": "team-a"}, "spec": {"mlPolicy": {"torch": {}}}}
        self.own = {r["metadata"]["name"]: r for r in (own, per_job, torch)}

    def get_namespaced_custom_object(self, group, version, namespace, plural, name):
        if plural == "trainingruntimes" and name in self.own:
            return self.own[name]
        return super().get_namespaced_custom_object(group, version, namespace, plural, name)

    def list_namespaced_custom_object(self, group, version, namespace, plural, **kwargs):
        if plural == "trainingruntimes":
            return {"items": list(self.own.values())}
        return super().list_namespaced_custom_object(group, version, namespace, plural, **kwargs)


def test_the_namespaces_own_runtime_is_listed_and_picked():
    cluster = _ClusterWithOwnRuntimes()
    c = _offline_client(cluster, cluster)
    rts = c.list_runtimes()
    # The cluster's first, then the namespace's own; neither a job's runtime nor PyTorch's.
    assert [(r.name, r.namespace) for r in rts] == [("mpi-intel", ""), ("mpi-openmpi", ""), ("mpi-openmpi-gpu", ""), ("team-mpi", "team-a")]
    c.create_job("mine", ["mpirun", "hostname"], workers=2, runtime="team-mpi")
    (_, tj), = [x for x in cluster.created if x[0] == "trainjobs"]
    assert tj["spec"]["runtimeRef"] == {"apiGroup": "trainer.kubeflow.org", "kind": "TrainingRuntime", "name": "team-mpi"}
    # A typo is named with the namespace's runtime as a suggestion; a job's own runtime is no base.
    with pytest.raises(InvalidJobError) as e:
        c.create_job("typo", ["mpirun", "hostname"], workers=2, runtime="team-mpo")
    assert "did you mean 'team-mpi'" in str(e.value)
    with pytest.raises(InvalidJobError):
        c.create_job("other", ["mpirun", "hostname"], workers=2, runtime="job-1")
    with pytest.raises(InvalidJobError) as e:
        c.create_job("torch", ["mpirun", "hostname"], workers=2, runtime="torch-mine")
    assert "not an MPI runtime" in str(e.value)


@pytest.mark.parametrize("policy, mpi", [
    ({"mpi": {}}, True),  # an empty policy is one, as for Trainer and runtimes.IsMPI
    ({"mpi": {"numProcPerNode": 2}}, True),
    ({"mpi": None}, False),
    ({"torch": {}}, False),
    (None, False),
])
def test_an_mpi_runtime_is_one_with_an_mpi_policy_even_empty(policy, mpi):
    from mpijob.backends.kube_api import _has_mpi_policy
    rt = {"spec": {"mlPolicy": policy} if policy is not None else {}}
    assert _has_mpi_policy(rt) is mpi
