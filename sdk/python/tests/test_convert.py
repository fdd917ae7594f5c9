"""Legacy MPIJob conversion (mpijob.convert) and the runtimes the SDK ships."""

import pathlib
import re

import pytest
import yaml
from support import REPO, _offline_client

from mpijob import (
    InvalidJobError,
)
from mpijob import convert as conv


def test_sdk_ships_the_clis_runtimes():
    # convert_legacy converts against these, as the CLI does against the embedded ones.
    shipped = sorted((pathlib.Path(__file__).resolve().parents[1] / "mpijob" / "runtimes").glob("*.yaml"))
    want = sorted((REPO / "config" / "runtimes").glob("mpi-*.yaml"))
    assert [p.name for p in shipped] == [p.name for p in want], "copy config/runtimes/mpi-*.yaml to sdk/python/mpijob/runtimes/"
    for a, b in zip(shipped, want, strict=True):
        assert a.read_bytes() == b.read_bytes(), f"sdk/python/mpijob/runtimes/{a.name} differs from config/runtimes: copy it"
    assert set(conv.shipped_runtimes()) == {p.stem for p in want}


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


def test_convert_legacy_needs_no_api():
    c = _offline_client(None, None)  # any API call would fail
    res = c.convert_legacy((REPO / "pkg/legacy/testdata/basic-cpu.yaml").read_text())
    assert res["trainJob"]["kind"] == "TrainJob" and res["notes"]
