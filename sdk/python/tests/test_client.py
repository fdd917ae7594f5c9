"""The facade (mpijob.client): validation before any API call, typed errors, the reference docs."""

import json

import pytest
from support import REPO, _offline_client, _RecordingCustom

from mpijob import (
    InvalidJobError,
    JobFailedError,
    MPIJobClient,
)


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


def test_sdk_reference_is_current():
    """docs/sdk.md is generated from the docstrings: it must match them (`make docs`)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("gendoc", REPO / "sdk" / "python" / "tools" / "gendoc.py")
    gendoc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gendoc)
    text = (REPO / "docs" / "sdk.md").read_text()
    assert text == gendoc.render(), "docs/sdk.md is stale: run `make docs`"
    # Every public method of the client is in the reference, the readers of a job's data among them.
    from mpijob.client import MPIJobClient
    public = [n for n, m in vars(MPIJobClient).items() if not n.startswith("_") and callable(m)]
    assert {"get_progress", "get_artifacts", "get_events"} <= set(public)
    missing = [n for n in public if f"### `{n}(" not in text]
    assert not missing, f"docs/sdk.md leaves out {missing}"


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
    (lambda c: c.clone_job("a", "b", command=None), "command"),
    (lambda c: c.clone_job("a", "B"), "name"),
    (lambda c: c.create_job("a", ["mpirun"], workers=1, worker_image=" "), "worker_image"),
], ids=["until-str", "since-words", "since-0", "since-bool", "phase-typo", "timeout-negative", "grace-negative",
        "grace-str", "grace-bool", "clone-command-str", "clone-command-none", "clone-bad-name", "create-blank-image"])
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


def test_every_call_is_the_backends():
    # The facade holds no logic: each public call is an abstract call of the backend with the
    # same signature, and passes every argument through as it came; create_job passes its
    # arguments as one JobSpec.
    import inspect

    from mpijob.backends import Backend
    from mpijob.types import JobSpec

    # submit_job is create_job with its JobSpec built by the caller: the backend's create_job.
    calls = sorted(n for n, _ in inspect.getmembers(MPIJobClient, inspect.isfunction) if not n.startswith("_") and n != "submit_job")
    assert calls == sorted(Backend.__abstractmethods__)
    for n in calls:
        if n != "create_job":
            assert inspect.signature(getattr(MPIJobClient, n)) == inspect.signature(getattr(Backend, n)), n

    seen = []

    def recorder(name):
        def call(self, *args, **kwargs):
            seen.append((name, args, kwargs))
            return name
        return call

    Recording = type("Recording", (Backend,), {n: recorder(n) for n in calls})
    backend = Recording()
    backend.namespace, backend.last_log_sources = "team-a", {"launcher": "pod"}
    c = MPIJobClient(backend=backend)
    assert c.namespace == "team-a" and c.last_log_sources == {"launcher": "pod"}
    for n in calls:
        params = list(inspect.signature(getattr(MPIJobClient, n)).parameters.values())[1:]
        args = {p.name: object() for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
        extra = {"extra_override": object()} if any(p.kind == p.VAR_KEYWORD for p in params) else {}
        assert getattr(c, n)(**args, **extra) == n
        if n == "create_job":
            dry_run = args.pop("dry_run")
            assert seen[-1] == (n, (JobSpec(**args),), {"dry_run": dry_run})
        else:
            assert seen[-1] == (n, (), {**args, **extra}), n


def test_create_jobs_arguments_are_the_job_spec():
    # One list of a job's settings: create_job's parameters are JobSpec's fields (same order,
    # same defaults) and dry_run; clone_job takes them all but those a clone keeps.
    import dataclasses
    import inspect

    from mpijob.types import CLONE_KEEPS, JobSpec

    params = list(inspect.signature(MPIJobClient.create_job).parameters.values())[1:]
    got = [(p.name, p.default) for p in params if p.name != "dry_run"]
    want = [(f.name, inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default) for f in dataclasses.fields(JobSpec)]
    assert got == want
    assert set(CLONE_KEEPS) <= set(JobSpec.field_names())


def test_submit_job_takes_one_typed_job_spec():
    # The typed form and the keyword form submit the same JobSpec; anything else is refused,
    # naming the argument, before any API call.
    from dataclasses import replace

    from mpijob import JobSpec
    from mpijob.backends import Backend
    from mpijob.errors import InvalidJobError

    seen = []

    class Recording(Backend):
        pass

    for n in Backend.__abstractmethods__:
        setattr(Recording, n, lambda self, *a, **k: seen.append((a, k)) or "created")
    Recording.__abstractmethods__ = frozenset()
    backend = Recording()
    backend.namespace = "team-a"
    c = MPIJobClient(backend=backend)
    spec = JobSpec(name="train", command=["mpirun", "python3", "train.py"], workers=4, data_connection="s3-data", retries=2)
    assert c.submit_job(spec) == "created"
    assert seen[-1] == ((spec,), {"dry_run": False})
    c.create_job("train", ["mpirun", "python3", "train.py"], workers=4, data_connection="s3-data", retries=2, dry_run=True)
    assert seen[-1] == ((spec,), {"dry_run": True})
    bigger = replace(spec, workers=8)
    c.submit_job(bigger)
    assert seen[-1][0][0].workers == 8 and spec.workers == 4
    n = len(seen)
    for bad in ({"name": "train", "command": ["mpirun"], "workers": 1}, "train", None):
        with pytest.raises(InvalidJobError) as e:
            c.submit_job(bad)
        assert e.value.field == "spec" and "is not a JobSpec" in str(e.value)
    with pytest.raises(InvalidJobError, match="keyword arguments go to create_job"):
        c.submit_job({})
    assert len(seen) == n  # nothing reached the backend
