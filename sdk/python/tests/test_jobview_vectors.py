"""The failed pods a status names, read from the vectors Go's pkg/jobview tests too
(pkg/jobview/testdata/pods.json): no interface parses the diagnosis's message for them."""

import json
from pathlib import Path

import pytest

from mpijob import FailedPod, JobStatus

ROOT = Path(__file__).resolve().parents[3]
VECTORS = json.loads((ROOT / "pkg/jobview/testdata/pods.json").read_text())["vectors"]


@pytest.mark.parametrize("v", VECTORS, ids=[v["name"] for v in VECTORS])
def test_failed_pods_match_go(v):
    obj = {"metadata": {"name": "pi", "annotations": {"mpijob.dev/status": json.dumps(v["status"])}}}
    got = JobStatus.from_trainjob(obj).failed
    want = [FailedPod(role=f["role"], index=f["index"], reason=f["reason"], pod=f.get("pod", ""), node=f.get("node", ""))
            for f in v["failed"]]
    assert got == want


def test_a_status_without_the_list_has_none():
    obj = {"metadata": {"name": "pi", "annotations": {"mpijob.dev/status": json.dumps({"phase": "Failed"})}}}
    assert JobStatus.from_trainjob(obj).failed == []
