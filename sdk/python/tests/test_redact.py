"""Redaction of secrets in logs and texts (mpijob.redact), from the rules and vectors Go uses."""

import json
import pathlib

import pytest
from support import REPO

from mpijob import (
    redact,
)

REDACT_VECTORS = json.loads((REPO / "pkg/logs/testdata/redact-vectors.json").read_text())


@pytest.mark.parametrize("v", REDACT_VECTORS, ids=[v["name"] for v in REDACT_VECTORS])
def test_redact_matches_the_cli(v):
    # The vectors the Go tests load too (pkg/logs/testdata).
    got, n = redact(v["in"])
    assert got == v["want"]
    assert n == v["count"]


def test_sdk_ships_the_clis_redaction_rules():
    shipped = (pathlib.Path(__file__).resolve().parents[1] / "mpijob" / "redact-rules.json").read_bytes()
    assert shipped == (REPO / "pkg/logs/redact-rules.json").read_bytes(), \
        "copy pkg/logs/redact-rules.json to sdk/python/mpijob/"
