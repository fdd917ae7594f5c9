"""Stacks: the shared vectors (pkg/stacks/testdata/vectors.json), the collector shipped
as Go's, and get_stacks over a mocked API."""

import json
import re

import pytest
from backends.test_kubernetes import _Cluster, _pod, _status_job
from support import REPO, _offline_client

from mpijob import MPIJobError, PermissionDeniedError
from mpijob import stacks as st

VECTORS = json.loads((REPO / "pkg/stacks/testdata/vectors.json").read_text())["cases"]


def test_the_collector_is_gos():
    shipped = (REPO / "sdk/python/mpijob/stacks-collect.sh").read_bytes()
    assert shipped == (REPO / "pkg/stacks/collect.sh").read_bytes(), "copy pkg/stacks/collect.sh to sdk/python/mpijob/stacks-collect.sh"
    assert shipped.decode() == st.SCRIPT


@pytest.mark.parametrize("case", VECTORS, ids=[c["name"] for c in VECTORS])
def test_vectors(case):
    ranks = []
    for p in case["pods"]:
        pod = st.Pod(name=p["pod"]["name"], worker=p["pod"]["worker"], node=p["pod"].get("node", ""))
        ranks += st.ranks_of(pod, st.parse(p["output"]))
    groups = st.group(ranks)
    got = {"groups": [{"rankText": g.rank_text, "callee": g.callee, "where": g.where, "headline": g.headline,
                       "states": g.states, "pods": g.pods} for g in groups],
           "contrast": st.contrast(groups)}
    assert got == case["want"]


@pytest.mark.parametrize(("source", "want"), [
    ("comm.Allreduce(sendbuf, recvbuf, op=MPI.SUM)", "comm.Allreduce"),
    ("loss = float(comm.allreduce(x))", "comm.allreduce"),
    ("if (ready): time.sleep(1)", "time.sleep"),
    ("print(len(x))", ""),
    ("return torch.distributed.barrier()", "torch.distributed.barrier"),
])
def test_callee(source, want):
    assert st.callee(source) == want


def _running(job, role, index, node="n1"):
    p = _pod(job, role, index)
    from kubernetes import client as k
    p.status = k.V1PodStatus(phase="Running")
    p.spec = k.V1PodSpec(containers=[], node_name=node)
    return p


def test_get_stacks_groups_every_workers_ranks(monkeypatch):
    case = VECTORS[0]
    pods = [_running("a", "launcher", 0), _running("a", "node", 0, "kind-worker"), _running("a", "node", 1, "kind-worker2")]
    cluster = _Cluster(jobs=[_status_job("a", {"phase": "Running", "message": "m", "workersReady": 2, "workersTotal": 2})], pods=pods)
    c = _offline_client(cluster, cluster)
    outputs = {"a-launcher-0-0-abcde": "", "a-node-0-0-abcde": case["pods"][0]["output"], "a-node-0-1-abcde": case["pods"][1]["output"]}
    calls = []

    def exec_pod(pod, container, command):
        calls.append((pod, container, command[:2]))
        yield outputs[pod]

    monkeypatch.setattr(c._backend._api, "exec_pod", exec_pod)
    s = c.get_stacks("a")
    assert sorted(calls) == sorted((p, "node", ["sh", "-c"]) for p in outputs)
    assert [g.headline for g in s.groups] == [g["headline"] for g in case["want"]["groups"]]
    assert s.contrast == case["want"]["contrast"]
    text = str(s)
    assert text.splitlines()[0] == case["want"]["groups"][0]["headline"]
    assert re.search(r"\n    train.py:120 step\(\) +comm.Allreduce\(sendbuf, recvbuf, op=MPI.SUM\)\n", text)
    assert text.endswith("Rank 7 waits in comm.recv while ranks 0-6 wait in comm.Allreduce.")


def test_get_stacks_refuses_what_it_cannot_read(monkeypatch):
    pods = [_running("a", "node", 0)]
    cluster = _Cluster(jobs=[_status_job("a", {"phase": "Running", "message": "m"}), _status_job("done", {"phase": "Succeeded", "message": "m"}),
                             _status_job("new", {"phase": "Pending", "message": "m"})], pods=pods)
    c = _offline_client(cluster, cluster)
    with pytest.raises(MPIJobError, match=r"job done is Succeeded: stacks shows where a running job's ranks are"):
        c.get_stacks("done")
    with pytest.raises(MPIJobError, match=r"job new has no running pod now \(phase Pending\)"):
        c.get_stacks("new")
    from mpijob import JobNotFoundError
    with pytest.raises(JobNotFoundError, match="did you mean"):
        c.get_stacks("aa")

    def forbidden(pod, container, command):
        raise PermissionDeniedError('pods "a-node-0-0-abcde" is forbidden: cannot create resource "pods/exec"')
        yield ""

    monkeypatch.setattr(c._backend._api, "exec_pod", forbidden)
    with pytest.raises(PermissionDeniedError, match="needs the right to create pods/exec in namespace team-a"):
        c.get_stacks("a")
