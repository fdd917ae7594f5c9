"""Log merging, rank tags and selections, durations (mpijob.logs), from Go's vectors."""

import json

import pytest
from support import REPO

from mpijob import (
    merge_logs,
)

MERGE = json.loads((REPO / "pkg/logs/testdata/merge-vectors.json").read_text())["vectors"]


@pytest.mark.parametrize("v", MERGE, ids=[v["name"] for v in MERGE])
def test_merge_logs_matches_the_cli(v):
    # The vectors Go's logs.Merge is tested with (pkg/logs/testdata).
    got = merge_logs([(label, lines) for label, lines in v["streams"]])
    assert [f"{label} | {r}" for label, r in got] == v["want"]


@pytest.mark.parametrize("since,want", [(90, 90), ("90s", 90), ("5m", 300), ("1h30m", 5400)])
def test_since_takes_seconds_and_durations(since, want):
    from mpijob.validation import seconds
    assert seconds("since", since) == want


RANK_VECTORS = json.loads((REPO / "pkg/logs/testdata/rank-vectors.json").read_text())


@pytest.mark.parametrize("v", RANK_VECTORS["lines"], ids=lambda v: v["name"])
def test_rank_tags_as_go_reads_them(v):
    from mpijob import logs as lg
    got = lg.split_rank(v["text"])
    assert got == (None if v["rank"] is None else (v["rank"], v["stream"], v["message"]))


@pytest.mark.parametrize("v", RANK_VECTORS["selections"], ids=lambda v: v["spec"] or "empty")
def test_rank_selections_as_go_reads_them(v):
    from mpijob import logs as lg
    if "error" in v:
        with pytest.raises(ValueError) as e:
            lg.parse_selection(v["spec"])
        assert str(e.value) == v["error"]
    else:
        assert sorted(lg.parse_selection(v["spec"])) == v["ranks"]
