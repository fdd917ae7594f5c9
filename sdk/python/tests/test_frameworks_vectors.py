"""The MPI rule (mpijob.frameworks), from the vectors Go's jobview.FrameworkOf tests too."""

import json
from pathlib import Path

import pytest

from mpijob.frameworks import framework_of, framework_of_trainjob, runtime_framework

ROOT = Path(__file__).resolve().parents[3]
FILE = json.loads((ROOT / "pkg/jobview/testdata/frameworks.json").read_text())
VECTORS = FILE["vectors"]


@pytest.mark.parametrize("v", VECTORS, ids=[v["name"] for v in VECTORS])
def test_framework_matches_go(v):
    j = v["job"]
    got = framework_of(j["name"], j["namespace"], j.get("labels"), j.get("runtimeKind", ""), j["runtimeName"],
                       FILE["runtimes"]["cluster"], FILE["runtimes"]["namespaced"])
    assert got == v["framework"]
    obj = {"metadata": {"name": j["name"], "namespace": j["namespace"], "labels": j.get("labels")},
           "spec": {"runtimeRef": {"name": j["runtimeName"], "kind": j.get("runtimeKind")}}}
    assert framework_of_trainjob(obj, FILE["runtimes"]["cluster"], FILE["runtimes"]["namespaced"]) == v["framework"]


def test_the_vectors_cover_each_answer():
    assert {v["framework"] for v in VECTORS} >= {"mpi", "torch", "unknown"}


@pytest.mark.parametrize("spec,labels,want", [
    ({"mlPolicy": {"mpi": {}}}, {"trainer.kubeflow.org/framework": "deepspeed"}, "mpi"),
    ({"mlPolicy": {"torch": {}}}, {}, "torch"),
    ({"mlPolicy": {}}, {"trainer.kubeflow.org/framework": "JAX"}, "jax"),
    ({}, {}, "unknown"),
    (None, None, "unknown"),
])
def test_runtime_framework(spec, labels, want):
    assert runtime_framework(spec, labels) == want
