"""A dry run says whether the cluster can place the job now: admission's placement warnings,
read from the API server's Warning headers."""

import pytest
from support import _offline_client, _RecordingCustom
from urllib3 import HTTPHeaderDict

from mpijob.placement import placement_lines, warnings_of


@pytest.mark.parametrize("headers,want", [
    ({}, []),
    (None, []),
    # One header as a plain mapping gives it.
    ({"Warning": '299 - "Placement: fits now."'}, ["Placement: fits now."]),
    # Several headers joined by ", " (as urllib3 joins them), quotes and backslashes escaped.
    ({"Warning": '299 - "a, b", 299 - "say \\"hi\\" \\\\ bye"'}, ["a, b", 'say "hi" \\ bye']),
    # Only code 299 (the API server's) counts.
    ({"Warning": '199 proxy "stale", 299 - "kept"'}, ["kept"]),
])
def test_warnings_of(headers, want):
    assert warnings_of(headers) == want


def test_warnings_of_headers_read_one_by_one():
    h = HTTPHeaderDict()
    h.add("Warning", '299 - "Placement: one"')
    h.add("Warning", '299 - "two, with a comma"')
    assert warnings_of(h) == ["Placement: one", "two, with a comma"]
    assert placement_lines(warnings_of(h)) == ["one"]


def test_a_dry_run_says_where_the_job_would_be_placed_and_a_create_does_not():
    job = _offline_client(_RecordingCustom()).create_job("j", ["mpirun", "train"], workers=2, dry_run=True)
    assert job.placement == [
        "fits now: the Launcher and 2 Workers (each 1 cpu) fit in what the nodes have free.",
        "Kueue queue team-a/default (ClusterQueue team-a): no job waits ahead of this one.",
    ]
    job = _offline_client(_RecordingCustom()).create_job("j", ["mpirun", "train"], workers=2)
    assert job.placement == []
