"""The progress line format and the data connection rules, against the vectors
Go tests too (pkg/progress/testdata, pkg/dataconn/testdata), and the examples'
own helper (examples/training/mpijob_io.py) against the same format."""

from __future__ import annotations

import io
import json
import pathlib

import pytest
from support import load_example

from mpijob import dataconn, progress
from mpijob import jobspec as js

ROOT = pathlib.Path(__file__).resolve().parents[3]
PROGRESS = json.loads((ROOT / "pkg/progress/testdata/vectors.json").read_text())
TRAINER_STATUS = json.loads((ROOT / "pkg/progress/testdata/trainer-status.json").read_text())["vectors"]
CONNECTIONS = json.loads((ROOT / "pkg/dataconn/testdata/connections.json").read_text())


@pytest.mark.parametrize("case", TRAINER_STATUS, ids=[c["name"] for c in TRAINER_STATUS])
def test_progress_from_trainer_status(case):
    got = progress.Progress.from_trainer_status(case["in"])
    if case["want"] is None:
        assert got is None
        return
    assert got is not None
    want = case["want"]
    assert (got.percent, got.eta_seconds, got.eta, got.metrics, got.updated) == (
        want["percent"], want["eta_seconds"], want["eta"], want["metrics"], want["updated"])


def test_a_jobs_progress_prefers_mpijobs_report():
    job = {"metadata": {}, "status": {"trainerStatus": {"progressPercentage": 42}}}
    assert str(progress.Progress.of_job(job)) == "42%"
    job["metadata"]["annotations"] = {progress.ANNOTATION: json.dumps(
        {"progressPercentage": 45, "currentEpoch": 9, "totalEpochs": 20})}
    assert str(progress.Progress.of_job(job)) == "45% epoch 9/20"
    assert progress.Progress.of_job({"metadata": {}}) is None


@pytest.mark.parametrize("case", PROGRESS["parse"], ids=[c["name"] for c in PROGRESS["parse"]])
def test_parse(case):
    got = progress.parse(case["line"])
    if case["report"] is None:
        assert got is None
        return
    assert got is not None
    want = case["report"]
    for k in progress.FIELDS:
        assert getattr(got, k) == want.get(k), k
    assert got.metrics == want.get("metrics", {})
    assert got.resumed == want.get("resumed")


@pytest.mark.parametrize("case", PROGRESS["emit"], ids=[c["name"] for c in PROGRESS["emit"]])
def test_emit_sdk_and_examples_helper(case):
    out = io.StringIO()
    assert progress.report(out, **case["fields"]) == case["line"]
    assert out.getvalue() == case["line"] + "\n"
    helper = load_example("mpijob_io")
    assert helper.progress(io.StringIO(), **case["fields"]) == case["line"]
    assert progress.parse(case["line"]) is not None


@pytest.mark.parametrize("case", PROGRESS["percent"])
def test_percent(case):
    assert progress.Report(**case["report"]).percent == case["percent"]


def test_report_needs_epoch_or_step():
    with pytest.raises(ValueError, match="epoch= or step="):
        progress.format_report(loss=0.5)


def test_nan_is_left_out_by_the_reader():
    line = progress.format_report(epoch=1, loss=float("nan"))
    r = progress.parse(line)
    assert r is not None and r.epoch == 1 and r.loss is None


def test_parse_log_reads_timestamps():
    log = ("2026-11-23T18:00:01.5Z MPIJOB_PROGRESS {\"epoch\": 1, \"total_epochs\": 2, \"loss\": 1.5}\n"
           "2026-11-23T18:00:02Z rank 0 of 4\n"
           "MPIJOB_PROGRESS {\"epoch\": 2, \"total_epochs\": 2}\n")
    got = progress.parse_log(log)
    assert [r.epoch for r in got] == [1, 2]
    assert got[0].time is not None and got[0].time.second == 1 and got[1].time is None


def test_progress_from_annotation():
    p = progress.Progress.from_annotations({progress.ANNOTATION: json.dumps(
        {"progressPercentage": 45, "currentEpoch": 9, "totalEpochs": 20, "trainMetrics": {"loss": 0.25}})})
    assert p is not None and str(p) == "45% epoch 9/20" and p.metrics == {"loss": 0.25}
    assert progress.Progress.from_annotations({progress.ANNOTATION: "{broken"}) is None
    assert progress.Progress.from_annotations({}) is None


@pytest.mark.parametrize("case", CONNECTIONS["check"], ids=[c["name"] for c in CONNECTIONS["check"]])
def test_check_connection(case):
    sec = case["secret"]
    got = dataconn.check(case["connection"], None if sec is None else {"metadata": {"labels": sec["labels"], "annotations": sec["annotations"]}, "data": sec["data"]})
    if case["problem"] is None:
        assert got is None
        return
    assert got is not None
    assert (got.connection, got.key, got.problem) == (case["problem"]["connection"], case["problem"].get("key", ""), case["problem"]["problem"])


def test_env_holds_references_only():
    env = dataconn.env("digits", ["local-s3"], [])
    for e in env:
        if "valueFrom" in e:
            assert set(e["valueFrom"]) == {"secretKeyRef"} and e["valueFrom"]["secretKeyRef"]["name"] == "local-s3"
        else:
            assert e["name"].startswith(("MPIJOB_", "OMPI_MCA_")), e


def test_input_of_reads_connections_back():
    base = json.loads((ROOT / "pkg/jobspec/testdata/vectors/data-connections-and-pvc.json").read_text())
    inp = js.Input.from_dict(base["input"])
    rt = base["want"]["trainingRuntime"]
    _, worker = js._node_containers(rt["spec"])
    assert dataconn.connections_of(worker["env"]) == inp.data_connections
    assert [p.to_dict() for p in js._pvcs_of(rt["spec"], worker)] == [p.to_dict() for p in inp.pvcs]
