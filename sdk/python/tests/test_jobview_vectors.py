"""The one view of a job the Go interfaces share (pkg/jobview), from the vectors Go tests too
(pkg/jobview/testdata): the failed pods a status names (no interface parses the message for
them) and where each log is read."""

import json
from pathlib import Path

import pytest

from mpijob import FailedPod, JobStatus, PodRef

ROOT = Path(__file__).resolve().parents[3]
VECTORS = json.loads((ROOT / "pkg/jobview/testdata/pods.json").read_text())["vectors"]


@pytest.mark.parametrize("v", VECTORS, ids=[v["name"] for v in VECTORS])
def test_failed_pods_match_go(v):
    obj = {"metadata": {"name": "pi", "annotations": {"mpijob.dev/status": json.dumps(v["status"])}}}
    got = JobStatus.from_trainjob(obj).failed
    want = [FailedPod(role=f["role"], index=f["index"], reason=f["reason"], pod=f.get("pod", ""), node=f.get("node", ""),
                      exit_code=f.get("exitCode"), signal=f.get("signal", 0))
            for f in v["failed"]]
    assert got == want


@pytest.mark.parametrize("v", [v for v in VECTORS if "subject" in v["status"]], ids=lambda v: v["name"])
def test_subject_is_the_status_own(v):
    obj = {"metadata": {"name": "pi", "annotations": {"mpijob.dev/status": json.dumps(v["status"])}}}
    s = v["status"]["subject"]
    assert JobStatus.from_trainjob(obj).subject == PodRef(role=s["role"], index=s["index"])


def test_no_subject_or_a_garbled_one_is_none():
    for subject in (None, {"role": "Worker"}, {"role": "rank", "index": 1}, "Worker 1"):
        status = {"phase": "Failed"} | ({"subject": subject} if subject is not None else {})
        obj = {"metadata": {"name": "pi", "annotations": {"mpijob.dev/status": json.dumps(status)}}}
        assert JobStatus.from_trainjob(obj).subject is None, subject


def test_the_vectors_ask_more_than_a_copy():
    # A reader that returned status.failed as it is would pass vectors whose
    # list needs no cleaning: at least one must differ.
    assert any(v["status"].get("failed", []) != v["failed"] for v in VECTORS)


def test_a_status_without_the_list_has_none():
    obj = {"metadata": {"name": "pi", "annotations": {"mpijob.dev/status": json.dumps({"phase": "Failed"})}}}
    assert JobStatus.from_trainjob(obj).failed == []


LOG_SOURCES = json.loads((ROOT / "pkg/jobview/testdata/log-sources.json").read_text())["vectors"]


@pytest.mark.parametrize("v", LOG_SOURCES, ids=[v["name"] for v in LOG_SOURCES])
def test_log_sources_match_go(v):
    from mpijob.logs import log_from
    w = v["where"]
    got = log_from(w["role"], pod_live=w.get("podLive", False), launcher_live=w.get("launcherLive", False),
                   finished=w.get("finished", False), store=w.get("store", False), store_only=w.get("storeOnly", False))
    assert got == v["from"]


def test_how_a_pod_ended_is_numbers():
    v = next(v for v in VECTORS if any("exitCode" in f for f in v["failed"]))
    obj = {"metadata": {"name": "pi", "annotations": {"mpijob.dev/status": json.dumps(v["status"])}}}
    s = JobStatus.from_trainjob(obj)
    assert [(f.exit_code, f.signal) for f in s.failed] == [(f.get("exitCode"), f.get("signal", 0)) for f in v["failed"]]
    assert any(f.signal == 9 for f in s.failed)
    assert [(p.exit_code, p.signal) for p in s.pods] == [(p.get("exitCode"), p.get("signal", 0)) for p in v["status"]["pods"]]


def test_garbled_exit_codes_are_none():
    status = {"phase": "Failed", "failed": [{"role": "worker", "index": 1, "reason": "x", "exitCode": "137", "signal": True}]}
    obj = {"metadata": {"name": "pi", "annotations": {"mpijob.dev/status": json.dumps(status)}}}
    f = JobStatus.from_trainjob(obj).failed[0]
    assert (f.exit_code, f.signal) == (None, 0)


LOG_PLANS = json.loads((ROOT / "pkg/jobview/testdata/log-plans.json").read_text())["vectors"]


@pytest.mark.parametrize("v", LOG_PLANS, ids=[v["name"] for v in LOG_PLANS])
def test_log_plans_match_go(v):
    from mpijob.logs import LogPlan, LogRead, plan_logs
    j, req = v["job"], v["request"]
    got = plan_logs(req["target"], workers=j["workers"], launcher_live=j.get("launcherLive", False),
                    live_workers=j.get("liveWorkers", []), finished=j.get("finished", False), store=j.get("store", False),
                    store_only=req.get("storeOnly", False))
    p = v["plan"]
    want = LogPlan(reads=[LogRead(r["label"], r["role"], r["index"], r["from"]) for r in p.get("reads", [])],
                   workers=p["workers"], missing=p.get("missing", ""))
    assert got == want


JOBS = json.loads((ROOT / "pkg/jobview/testdata/jobs.json").read_text())["vectors"]


@pytest.mark.parametrize("v", JOBS, ids=[v["name"] for v in JOBS])
def test_row_matches_go(v):
    # The cells `kubectl mpijob get -o wide` prints of the same TrainJob (Go: jobview.RowOf).
    from datetime import datetime

    from mpijob import JobRow, MPIJob
    now = datetime.fromisoformat(v["now"].replace("Z", "+00:00"))
    got = MPIJob.from_trainjob(v["trainJob"]).row(now)
    assert got == JobRow(**v["row"])


def test_row_from_metadata_alone_matches_go():
    # A list reads metadata alone where the manager's status names the runtime and the shape:
    # the row is the same.
    from datetime import datetime

    from mpijob import JobRow, MPIJob
    checked = 0
    for v in JOBS:
        meta = {"metadata": v["trainJob"]["metadata"], "kind": "PartialObjectMetadata"}
        job = MPIJob.from_metadata(meta)
        if job is None or v["trainJob"]["metadata"].get("labels", {}).get("mpijob.dev/base-runtime"):
            continue
        now = datetime.fromisoformat(v["now"].replace("Z", "+00:00"))
        assert job.row(now) == JobRow(**v["row"]), v["name"]
        checked += 1
    assert checked >= 3


def test_human_duration_is_kubectls():
    from datetime import timedelta

    from mpijob.types import human_duration
    cases = {0: "0s", -1: "0s", -5: "<invalid>", 119: "119s", 120: "2m", 150: "2m30s", 600: "10m", 10799: "179m",
             3 * 3600 + 60: "3h1m", 8 * 3600: "8h", 47 * 3600: "47h", 2 * 86400: "2d", 7 * 86400 + 3600: "7d1h",
             30 * 86400: "30d", 3 * 365 * 86400: "3y", 3 * 365 * 86400 + 86400: "3y1d", 9 * 365 * 86400: "9y"}
    for s, want in cases.items():
        assert human_duration(timedelta(seconds=s)) == want, s


DETAILS = json.loads((ROOT / "pkg/jobview/testdata/details.json").read_text())["vectors"]


@pytest.mark.parametrize("v", DETAILS, ids=[f"{i}-{v['job']}" for i, v in enumerate(DETAILS)])
def test_detail_matches_go(v):
    # The job page's stale note, history, progress line and metrics (Go: jobview.DetailOf) from the same
    # TrainJob, as the SDK's MPIJob, JobStatus and Progress give them.
    from datetime import datetime

    from mpijob import MPIJob
    from mpijob.types import stale_note

    def when(s):
        t = datetime.fromisoformat(s.replace("Z", "+00:00"))
        return None if t.year == 1 else t

    src = next(j for j in JOBS if j["name"] == v["job"])
    now = when(src["now"])
    job = MPIJob.from_trainjob(src["trainJob"])
    want = v["detail"]
    manager = v.get("manager")
    note = ""
    if manager is not None and job.status.from_manager:
        note = stale_note(manager["Running"], when(manager["Since"]), job.status.observed_time, now)
    assert note == want["staleNote"]
    history = [{"time": t.time.strftime("%Y-%m-%dT%H:%M:%SZ"), "phase": t.phase,
                **({"reason": t.reason} if t.reason else {}), **({"message": t.message} if t.message else {})}
               for t in job.status.history]
    assert history == (want.get("history") or [])
    assert (job.progress.line() if job.progress else "") == want["progressLine"]
    assert (job.progress.metric_lines() if job.progress else []) == (want.get("metrics") or [])
    assert job.status.resumed == want.get("resumedLine", "")
    assert job.status.attempts == want.get("attemptsLine", "")


JOB_PODS = json.loads((ROOT / "pkg/jobpods/testdata/job-pods.json").read_text())["vectors"]


def _pod(p):
    from datetime import datetime
    from types import SimpleNamespace
    labels = {}
    if p.get("replicatedJob"):
        labels["jobset.sigs.k8s.io/replicatedjob-name"] = p["replicatedJob"]
    if "index" in p:
        labels["batch.kubernetes.io/job-completion-index"] = p["index"]
    created = datetime.fromisoformat(p["created"].replace("Z", "+00:00"))
    return SimpleNamespace(metadata=SimpleNamespace(name=p["name"], labels=labels, creation_timestamp=created))


@pytest.mark.parametrize("v", JOB_PODS, ids=[v["name"] for v in JOB_PODS])
def test_job_pods_sort_as_go(v):
    from mpijob.logs import split_pods
    launchers, workers = split_pods([_pod(p) for p in v["pods"]])
    assert [p.metadata.name for p in launchers] == v["launchers"]
    assert [p.metadata.name for p in workers] == v["workers"]


LOG_OPTIONS = json.loads((ROOT / "pkg/jobpods/testdata/log-options.json").read_text())["vectors"]


@pytest.mark.parametrize("v", LOG_OPTIONS, ids=[v["name"] for v in LOG_OPTIONS])
def test_pod_log_options_match_go(v):
    import re

    from mpijob.logs import pod_log_options
    w = v["window"]
    got = pod_log_options(tail_lines=w.get("tailLines"), since_seconds=w.get("sinceSeconds"), follow=w.get("follow", False))
    want = {re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), k): val for k, val in v["want"].items()}
    assert got == want
