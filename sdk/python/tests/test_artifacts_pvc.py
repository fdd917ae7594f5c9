"""Reading a PVC's artifacts: the reader pod's spec and find's listing against the vectors
Go checks too (pkg/artifacts/testdata/reader.json), and the reader's calls with a stand-in
backend (the real cluster runs it in test/e2e TestPVCInAndOut)."""

from __future__ import annotations

import base64
import datetime
import json
import pathlib
from typing import Any

import pytest

from mpijob import artifacts
from mpijob.dataconn import PVC
from mpijob.errors import InvalidJobError, MPIJobError, PermissionDeniedError

ROOT = pathlib.Path(__file__).resolve().parents[3]
VECTORS = json.loads((ROOT / "pkg/artifacts/testdata/reader.json").read_text())


@pytest.mark.parametrize("v", VECTORS["reader_pod"], ids=lambda v: v["name"])
def test_reader_pod_spec(v: dict[str, Any]) -> None:
    before = json.dumps(v["template"], sort_keys=True)
    assert artifacts.reader_pod_spec(v["template"], v["claim"], v["mount"]) == v["want"]
    assert json.dumps(v["template"], sort_keys=True) == before, "the template changed"


@pytest.mark.parametrize("v", VECTORS["find"], ids=lambda v: v["name"])
def test_parse_find(v: dict[str, Any]) -> None:
    if v.get("error"):
        with pytest.raises(MPIJobError, match=v["error"]):
            artifacts.parse_find(v["output"])
        return
    got = artifacts.parse_find(v["output"])
    want = [{"name": w["name"], "size": w["size"],
             "last_modified": datetime.datetime.fromisoformat(w["lastModified"].replace("Z", "+00:00"))} for w in v["want"]]
    assert got == want


class FakeBackend:
    def __init__(self, files: dict[str, bytes], forbid: bool = False):
        self.files, self.forbid = files, forbid
        self.created: list[dict[str, Any]] = []
        self.deleted: list[str] = []
        self.commands: list[list[str]] = []

    def create_pod(self, body: dict[str, Any]) -> str:
        if self.forbid:
            raise PermissionDeniedError('pods is forbidden: User "viewer-a" cannot create resource "pods"')
        self.created.append(body)
        return "digits-artifacts-x1"

    def pod_state(self, pod: str) -> tuple[str, str]:
        return "Running", ""

    def delete_pod(self, pod: str) -> None:
        self.deleted.append(pod)

    def exec_pod(self, pod: str, container: str, command: list[str]):  # type: ignore[no-untyped-def]
        self.commands.append(command)
        if command[0] == "/bin/sh":
            listing = "".join(f"{len(b)} 1795000000.0 {n}\0" for n, b in self.files.items())
            yield listing[:7]
            yield listing[7:]
            return
        data = base64.b64encode(self.files[command[-1].rsplit("/", 1)[-1]]).decode()
        for i in range(0, len(data), 5):  # chunks that split base64 quads
            yield data[i:i + 5]


TJ = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "digits", "uid": "u-1"}}
TEMPLATE = {"containers": [{"name": "node", "image": "ghcr.io/mpijob/openmpi:4.1"}]}


def test_lists_downloads_and_deletes_the_reader(tmp_path: pathlib.Path) -> None:
    be = FakeBackend({"model.npz": bytes(range(256)) * 3, "metrics.json": b'{"accuracy": 0.95}'})
    with artifacts.PVCReader(be, TJ, TEMPLATE, PVC(claim="shared-data")) as r:
        got = artifacts.list_and_download_pvc(r, str(tmp_path), ["model.npz"])
    assert [o["name"] for o in got] == ["model.npz"]
    assert got[0]["uri"] == "pvc://shared-data/digits/model.npz"
    assert (tmp_path / "model.npz").read_bytes() == bytes(range(256)) * 3
    assert not (tmp_path / "metrics.json").exists()
    assert be.deleted == ["digits-artifacts-x1"]
    pod = be.created[0]
    assert pod["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    assert pod["metadata"]["labels"] == {artifacts.READER_LABEL: "digits"}
    # The claim is read where the reader mounts it, by programs named by absolute path.
    assert be.commands[0][:2] == ["/bin/sh", "-c"] and be.commands[0][-1] == "/mpijob-artifacts/shared-data/digits"
    assert be.commands[1] == ["/usr/bin/base64", "-w0", "--", "/mpijob-artifacts/shared-data/digits/model.npz"]
    mounts = pod["spec"]["containers"][0]["volumeMounts"]
    assert mounts == [{"name": mounts[0]["name"], "mountPath": "/mpijob-artifacts/shared-data", "readOnly": True}]


NAMES = json.loads((ROOT / "pkg/artifacts/testdata/names.json").read_text())


@pytest.mark.parametrize("v", NAMES["names"], ids=lambda v: repr(v["name"]))
def test_name_problem(v: dict[str, Any]) -> None:
    assert artifacts.name_problem(v["name"]) == v["problem"]


def test_names_the_job_chose_are_never_written_outside(tmp_path: pathlib.Path) -> None:
    be = FakeBackend({"../../x": b"evil", "ok.pt": b"good"})
    into = tmp_path / "into" / "here"
    into.mkdir(parents=True)
    with artifacts.PVCReader(be, TJ, TEMPLATE, PVC(claim="shared-data")) as r:
        got = artifacts.list_and_download_pvc(r, str(into), [])
    assert (into / "ok.pt").read_bytes() == b"good"
    assert not (tmp_path / "x").exists()
    skipped = [o for o in got if "skipped" in o]
    assert [o["name"] for o in skipped] == ["../../x"]
    assert "climbs out of the job's folder" in skipped[0]["skipped"]


def test_a_file_that_is_not_there(tmp_path: pathlib.Path) -> None:
    be = FakeBackend({"model.npz": b"w"})
    want = r"pvc://shared-data/digits/ has no such artifact; it has \['model.npz'\]"
    with pytest.raises(InvalidJobError, match=want), artifacts.PVCReader(be, TJ, TEMPLATE, PVC(claim="shared-data")) as r:
        artifacts.list_and_download_pvc(r, str(tmp_path), ["model.pt"])
    assert be.deleted == ["digits-artifacts-x1"], "the reader pod was left behind"


def test_a_user_who_may_not_create_pods() -> None:
    be = FakeBackend({}, forbid=True)
    want = r"reading a claim takes a short-lived pod.*pods/exec"
    with pytest.raises(PermissionDeniedError, match=want), artifacts.PVCReader(be, TJ, TEMPLATE, PVC(claim="shared-data")) as r:
        r.list()
    assert be.deleted == []


def test_a_download_replaces_nothing_unless_asked_and_writes_no_hidden_file(tmp_path: pathlib.Path) -> None:
    """The red team's PVC: a planted .git/config is never written, and a file already in the folder is kept
    (nothing downloaded) unless overwrite=True."""
    be = FakeBackend({".git/config": b"[core]\n\tfsmonitor = touch /tmp/pwned", "model.pt": b"new"})
    (tmp_path / "model.pt").write_bytes(b"mine")
    with pytest.raises(InvalidJobError, match=r"model.pt already exists: nothing was downloaded; pass overwrite=True") as e, \
            artifacts.PVCReader(be, TJ, TEMPLATE, PVC(claim="shared-data")) as r:
        artifacts.list_and_download_pvc(r, str(tmp_path), [])
    assert e.value.field == "overwrite"
    assert (tmp_path / "model.pt").read_bytes() == b"mine"
    with artifacts.PVCReader(be, TJ, TEMPLATE, PVC(claim="shared-data")) as r:
        got = artifacts.list_and_download_pvc(r, str(tmp_path), [], overwrite=True)
    assert (tmp_path / "model.pt").read_bytes() == b"new"
    assert not (tmp_path / ".git").exists()
    assert [o["name"] for o in got if "skipped" in o] == [".git/config"]
