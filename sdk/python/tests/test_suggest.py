"""Did-you-mean suggestions (mpijob.suggest), from Go's vectors."""

import json

import pytest
from support import REPO

SUGGEST = json.loads((REPO / "pkg/suggest/testdata/vectors.json").read_text())["vectors"]


@pytest.mark.parametrize("v", SUGGEST, ids=[v["name"] for v in SUGGEST])
def test_did_you_mean_matches_the_cli(v):
    # The vectors Go's suggest.Closest is tested with.
    from mpijob.suggest import closest
    assert closest(v["input"], v["candidates"]) == v["want"]
