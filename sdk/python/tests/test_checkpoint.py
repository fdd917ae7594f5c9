"""mpijob.checkpoint on a real folder (a PVC's place) and on S3 through a mocked client;
the real S3 store is tried by the cluster tests (test_training_cluster.py)."""

from __future__ import annotations

import io
import json
import os
import random
import signal

import numpy as np
import pytest

from mpijob import checkpoint as ck


def _state(seed: int = 0, hidden: int = 4) -> dict:
    rng = np.random.default_rng(seed)
    return {
        "model": {"fc1.weight": rng.normal(size=(hidden, 3)).astype(np.float32), "fc1.bias": np.zeros(hidden, np.float32)},
        "optimizer": {"state": {0: {"momentum": np.ones(3)}}, "param_groups": [{"lr": 0.1, "params": (0, 1)}]},
        "epoch_losses": [0.5, float("nan")],
        "note": "digits",
        "blob": b"\x00\x01",
    }


def test_save_then_load_latest_returns_the_newest_whole(tmp_path):
    uri = f"file://{tmp_path}/job/checkpoints/"
    for epoch in range(4):
        ck.save(_state(epoch), epoch=epoch, total_epochs=10, uri=uri, keep=2)
    got = ck.load_latest(uri, like=_state())
    assert got is not None and got.epoch == 3 and got.total_epochs == 10 and got.source == "own"
    want = _state(3)
    np.testing.assert_array_equal(got.state["model"]["fc1.weight"], want["model"]["fc1.weight"])
    assert got.state["optimizer"]["state"][0]["momentum"].tolist() == [1.0, 1.0, 1.0]
    assert got.state["optimizer"]["param_groups"][0]["params"] == (0, 1)  # tuples and int keys survive
    assert got.state["epoch_losses"][0] == 0.5 and np.isnan(got.state["epoch_losses"][1])
    assert got.state["note"] == "digits" and got.state["blob"] == b"\x00\x01"
    # keep=2: only the two newest are left, and nothing half-written.
    assert sorted(os.listdir(tmp_path / "job" / "checkpoints")) == ["ckpt-000002-000000000", "ckpt-000003-000000000"]
    assert [c.epoch for c in ck.list_checkpoints(uri)] == [2, 3]


def test_an_unfinished_checkpoint_is_ignored_and_a_torn_one_refused(tmp_path, capsys):
    uri = str(tmp_path)
    ck.save(_state(1), epoch=1, uri=uri)
    ck.save(_state(2), epoch=2, uri=uri)
    # epoch 3 never got its manifest: a write cut short.
    os.makedirs(tmp_path / "ckpt-000003-000000000")
    (tmp_path / "ckpt-000003-000000000" / "arrays.npz").write_bytes(b"partial")
    # epoch 2's arrays were cut after its manifest: torn.
    arrays = tmp_path / "ckpt-000002-000000000" / "arrays.npz"
    arrays.write_bytes(arrays.read_bytes()[:50])
    got = ck.load_latest(uri, like=_state())
    assert got is not None and got.epoch == 1
    np.testing.assert_array_equal(got.state["model"]["fc1.weight"], _state(1)["model"]["fc1.weight"])
    assert "refused a torn checkpoint" in capsys.readouterr().err


def test_a_checkpoint_of_another_model_is_refused_naming_the_tensor(tmp_path):
    ck.save(_state(hidden=4), epoch=0, uri=str(tmp_path))
    with pytest.raises(ck.CheckpointError) as e:
        ck.load_latest(str(tmp_path), like=_state(hidden=8))
    msg = str(e.value)
    assert "another model" in msg and "fc1.bias is 4 float32 in the checkpoint, 8 float32 in this model" in msg
    assert "Nothing was loaded" in msg


def test_a_foreign_manifest_is_refused(tmp_path):
    os.makedirs(tmp_path / "ckpt-000001-000000000")
    (tmp_path / "ckpt-000001-000000000" / "manifest.json").write_text(json.dumps({"format": "someone-else/2"}))
    with pytest.raises(ck.CheckpointError, match="format 'someone-else/2'"):
        ck.load_latest(str(tmp_path))


def test_resume_from_another_place_only_when_the_job_has_none(tmp_path, monkeypatch):
    other, own = tmp_path / "other", tmp_path / "own"
    ck.save(_state(7), epoch=7, total_epochs=9, uri=str(other))
    monkeypatch.setenv(ck.CHECKPOINT_ENV, f"file://{own}/")
    monkeypatch.setenv(ck.RESUME_ENV, f"file://{other}/")
    got = ck.load_latest(like=_state())
    assert got is not None and got.source == "resume" and got.epoch == 7
    assert ck.resumed_report(got)["from"].startswith(f"file://{other}/ckpt-000007")
    # Once the job has its own, that wins: a retry continues this job, not the other.
    ck.save(_state(8), epoch=8)
    got = ck.load_latest(like=_state())
    assert got is not None and got.source == "own" and got.epoch == 8


def test_resume_from_a_place_without_checkpoints_never_starts_from_zero(tmp_path, monkeypatch):
    (tmp_path / "checkpoint.pt").write_bytes(b"torch.save output")
    monkeypatch.setenv(ck.CHECKPOINT_ENV, f"file://{tmp_path}/own/")
    monkeypatch.setenv(ck.RESUME_ENV, f"file://{tmp_path}/")
    with pytest.raises(ck.CheckpointError, match=r"has no complete checkpoint \(it holds: checkpoint.pt"):
        ck.load_latest()


def test_first_run_has_nothing_to_resume(tmp_path, monkeypatch):
    monkeypatch.setenv(ck.CHECKPOINT_ENV, f"file://{tmp_path}/none/")
    monkeypatch.delenv(ck.RESUME_ENV, raising=False)
    assert ck.load_latest() is None


@pytest.mark.parametrize("kw, match", [
    ({"epoch": -1}, "epoch -1"),
    ({"epoch": 1, "keep": 0}, "keep 0"),
    ({"epoch": 1, "step": 1.5}, "step 1.5"),
])
def test_bad_arguments_name_the_value(tmp_path, kw, match):
    with pytest.raises(ck.CheckpointError, match=match):
        ck.save(_state(), uri=str(tmp_path), **kw)


def test_no_place_says_how_to_get_one(monkeypatch):
    monkeypatch.delenv(ck.CHECKPOINT_ENV, raising=False)
    with pytest.raises(ck.CheckpointError, match="--data-connection or --pvc"):
        ck.save(_state(), epoch=0)


def test_what_cannot_be_stored_is_named(tmp_path):
    with pytest.raises(ck.CheckpointError, match=r"cannot store object at state\['model'\]"):
        ck.save({"model": object()}, epoch=0, uri=str(tmp_path))
    assert ck.list_checkpoints(str(tmp_path)) == []


def test_rng_state_round_trip():
    random.seed(3)
    np.random.seed(3)
    s = json.loads(json.dumps(ck._encode(ck.rng_state())[0]))  # as stored
    arrays = ck._encode(ck.rng_state())[1]
    want = (random.random(), np.random.rand())
    ck.set_rng_state(ck._decode(s, arrays))
    assert (random.random(), np.random.rand()) == want


def test_stop_on_signal_notes_sigterm_instead_of_dying():
    stop = ck.StopOnSignal()
    try:
        assert not stop.requested()
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.requested() and stop.requested(lambda flag: flag)
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


class _FakeS3:
    """The calls mpijob.checkpoint makes, over a dict (the real store: the cluster tests)."""

    def __init__(self):
        self.objects: dict[tuple[str, str], bytes] = {}

    def put_object(self, Bucket, Key, Body):
        self.objects[(Bucket, Key)] = Body

    def get_object(self, Bucket, Key):
        if (Bucket, Key) not in self.objects:
            err = Exception("NoSuchKey")
            err.response = {"Error": {"Code": "NoSuchKey"}}
            raise err
        return {"Body": io.BytesIO(self.objects[(Bucket, Key)])}

    def delete_object(self, Bucket, Key):
        self.objects.pop((Bucket, Key), None)

    def list_objects_v2(self, Bucket, Prefix, Delimiter=None, MaxKeys=1000):
        keys = sorted(k for b, k in self.objects if b == Bucket and k.startswith(Prefix))
        if not Delimiter:
            return {"Contents": [{"Key": k} for k in keys]}
        prefixes = sorted({Prefix + k[len(Prefix):].split("/")[0] + "/" for k in keys if "/" in k[len(Prefix):]})
        return {"Contents": [{"Key": k} for k in keys if "/" not in k[len(Prefix):]], "CommonPrefixes": [{"Prefix": p} for p in prefixes]}

    def get_paginator(self, name):
        fake = self

        class P:
            def paginate(self, **kw):
                return [fake.list_objects_v2(**kw)]

        return P()


def test_s3_place_writes_the_manifest_last_and_prunes(monkeypatch):
    fake = _FakeS3()
    monkeypatch.setattr(ck._Store, "_s3", lambda self: fake)
    uri = "s3://team-a/digits/checkpoints/"
    for e in range(3):
        ck.save(_state(e), epoch=e, uri=uri, keep=2)
    folders = sorted({k.split("/")[2] for _, k in fake.objects})
    assert folders == ["ckpt-000001-000000000", "ckpt-000002-000000000"]
    # A manifest lost (a write cut before its last object): that checkpoint is not complete.
    del fake.objects[("team-a", "digits/checkpoints/ckpt-000002-000000000/manifest.json")]
    got = ck.load_latest(uri, like=_state())
    assert got is not None and got.epoch == 1 and got.uri == "s3://team-a/digits/checkpoints/ckpt-000001-000000000/"


def test_load_on_rank0_raises_on_every_rank(tmp_path):
    ck.save(_state(hidden=4), epoch=1, uri=str(tmp_path))
    sent = {}

    def bcast(o):  # rank 0's object reaches the other ranks
        sent.setdefault("v", o)
        return sent["v"]

    with pytest.raises(ck.CheckpointError, match="another model"):
        ck.load_on_rank0(0, bcast, str(tmp_path), like=_state(hidden=8))
    with pytest.raises(ck.CheckpointError, match="rank 0 refused"):
        ck.load_on_rank0(1, bcast, str(tmp_path), like=_state(hidden=8))
    sent.clear()
    got = ck.load_on_rank0(0, bcast, str(tmp_path), like=_state(hidden=4))
    assert got is not None and ck.load_on_rank0(1, bcast, str(tmp_path)) is got
