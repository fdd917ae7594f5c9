"""The SDK's job builder against the vectors Go's pkg/jobspec is tested with:
a rule changed on one side only fails here or there."""

import json
import pathlib

import pytest
import yaml

from mpijob import jobspec

ROOT = pathlib.Path(__file__).resolve().parents[3]
VECTORS = sorted((ROOT / "pkg" / "jobspec" / "testdata" / "vectors").glob("*.json"))


def _base(name):
    return yaml.safe_load((ROOT / "config" / "runtimes" / f"{name}.yaml").read_text())


def _canon(o, in_resources=False):
    """Go writes empty metadata as {} and quantities as strings; YAML has ints."""
    if isinstance(o, dict):
        out = {k: _canon(v, in_resources or k in ("requests", "limits")) for k, v in o.items()}
        return {k: v for k, v in out.items() if v not in ({}, None)}
    if isinstance(o, list):
        return [_canon(v, in_resources) for v in o]
    if in_resources and isinstance(o, (int, float)) and not isinstance(o, bool):
        return str(o)
    return o


def test_there_are_vectors():
    assert len(VECTORS) >= 10


@pytest.mark.parametrize("path", VECTORS, ids=[p.stem for p in VECTORS])
def test_vector(path):
    v = json.loads(path.read_text())
    inp = jobspec.Input.from_dict(v["input"])
    base = _base(inp.runtime)
    if v.get("base_namespace"):
        # A TrainingRuntime of that namespace, as Go's runtimes.AsBase carries it.
        base["kind"] = "TrainingRuntime"
        base["metadata"]["namespace"] = v["base_namespace"]
    if "error" in v:
        with pytest.raises(jobspec.BuildError) as e:
            jobspec.build(inp, base)
        assert (e.value.field, e.value.value, e.value.problem) == (v["error"]["field"], v["error"]["value"], v["error"]["problem"])
        return
    job = jobspec.build(inp, base)
    assert _canon(job.train_job) == _canon(v["want"]["trainJob"])
    assert _canon(job.runtime) == _canon(v["want"].get("trainingRuntime"))


def test_name_limit_matches_go():
    # 63 - len("-launcher-0-0-xxxxx"), as api.MaxJobNameLength in Go.
    assert jobspec.MAX_NAME == 44
