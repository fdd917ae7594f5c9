"""Checkpoints that outlive a job's pods: save, load the newest, keep the last K.

Every MPI job with a data connection or a PVC has a checkpoint place,
``$MPIJOB_CHECKPOINT_URI`` (``s3://BUCKET/JOB/checkpoints/`` or
``file:///mnt/CLAIM/JOB/checkpoints/``). It is named after the job, so a retry
(``--retries``), a resume after a suspend and a restart after Kueue preempted
the job all find what the run before wrote. ``$MPIJOB_RESUME_FROM`` (``--resume-from``)
is where a job with no checkpoint of its own yet takes its first one.

The ten lines a training script adds::

    from mpijob import checkpoint            # in mpijob's images: import mpijob_checkpoint as checkpoint

    stop = checkpoint.StopOnSignal()         # SIGTERM (preemption, suspend): save, then stop
    start = 0
    got = checkpoint.load_latest(like={"model": model.state_dict()})
    if got:                                  # resumed: weights, optimizer, epoch, RNG
        model.load_state_dict(got.state["model"]); opt.load_state_dict(got.state["optimizer"])
        checkpoint.set_rng_state(got.state["rng"]); start = got.epoch + 1
    for epoch in range(start, epochs):
        train_one_epoch(...)
        if rank == 0:
            checkpoint.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                             "rng": checkpoint.rng_state()}, epoch=epoch, total_epochs=epochs)
        if stop.requested(comm): break       # every rank stops at the same epoch

What a checkpoint is: a folder ``ckpt-EEEEEE-SSSSSSSSS/`` (epoch, step) holding
``arrays.npz`` (every tensor and array, no pickle), ``state.json`` (the rest of the
state: numbers, strings, lists, dicts) and ``manifest.json``, written last, with each
file's size and SHA-256. A folder without its manifest was never finished and is
ignored; one whose files do not match their manifest is torn and refused, and the
newest complete one before it is taken. A checkpoint of another model (other tensor
names or shapes than ``like``) is refused with both named, never loaded in part.

On a PVC a checkpoint is written under a temporary name and renamed, so it appears
whole; on S3 its manifest is the last object written. Only the standard library is
needed, NumPy for arrays, boto3 for ``s3://`` and PyTorch or TensorFlow for their
tensors. This one file is shipped in mpijob's images as
``/opt/mpijob/examples/mpijob_checkpoint.py``.
"""

from __future__ import annotations

import base64
import datetime as _dt
import hashlib
import io
import json
import math
import os
import random
import shutil
import signal
import sys
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

#: The format every manifest names; another is refused.
FORMAT = "mpijob-checkpoint/1"
CHECKPOINT_ENV = "MPIJOB_CHECKPOINT_URI"
RESUME_ENV = "MPIJOB_RESUME_FROM"
MANIFEST = "manifest.json"
ARRAYS = "arrays.npz"
TREE = "state.json"
PREFIX = "ckpt-"
#: How many complete checkpoints save keeps by default (older ones are deleted).
DEFAULT_KEEP = 3


class CheckpointError(Exception):
    """A checkpoint that cannot be written or loaded; the message says which and what to do."""


@dataclass
class Checkpoint:
    """One complete checkpoint: where it is and what it holds."""

    uri: str
    epoch: int
    step: int
    written: _dt.datetime
    total_epochs: int | None = None
    model: str = ""
    summary: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)

    def age_seconds(self, now: _dt.datetime | None = None) -> float:
        return ((now or _dt.datetime.now(_dt.timezone.utc)) - self.written).total_seconds()


@dataclass
class Loaded(Checkpoint):
    """A checkpoint read back: ``state`` is what was saved; ``source`` is ``"own"`` (this job's
    checkpoint place) or ``"resume"`` (``$MPIJOB_RESUME_FROM``)."""

    state: Any = None
    source: str = "own"


# --- where checkpoints live: a folder on a PVC or a prefix in a bucket -------------------------


def _split(uri: str) -> tuple[str, str, str]:
    u = urlparse(uri)
    if u.scheme == "s3":
        if not u.netloc:
            raise CheckpointError(f"{uri}: names no bucket: use s3://BUCKET/PATH/")
        return "s3", u.netloc, u.path.lstrip("/")
    if u.scheme == "file":
        return "file", "", u.path
    if u.scheme:
        raise CheckpointError(f"{uri}: checkpoints go to s3://BUCKET/PATH/, file:///PATH/ or a folder")
    return "file", "", uri


def _join(uri: str, *names: str) -> str:
    return uri.rstrip("/") + "/" + "/".join(names)


class _Store:
    """The few operations checkpoints need, on a folder or an S3 prefix."""

    def __init__(self, uri: str):
        self.uri = uri if uri.endswith("/") else uri + "/"
        self.kind, self.bucket, self.key = _split(self.uri)
        self._client: Any = None

    def _s3(self) -> Any:
        if self._client is None:
            import boto3  # only s3:// needs it
            from botocore.config import Config

            self._client = boto3.client(
                "s3",
                config=Config(connect_timeout=5, read_timeout=120, retries={"max_attempts": 3}),
                endpoint_url=os.environ.get("AWS_S3_ENDPOINT") or None,
                region_name=os.environ.get("AWS_DEFAULT_REGION") or "us-east-1",
                aws_access_key_id=os.environ.get("AWS_ACCESS_KEY_ID"),
                aws_secret_access_key=os.environ.get("AWS_SECRET_ACCESS_KEY"),
            )
        return self._client

    def _fail(self, action: str, where: str, e: Exception) -> CheckpointError:
        code = ""
        if hasattr(e, "response"):
            code = (getattr(e, "response", {}) or {}).get("Error", {}).get("Code", "")
        fix = {
            "NoSuchBucket": "the bucket does not exist: fix AWS_S3_BUCKET in the data connection",
            "AccessDenied": "the store refused the keys: this job's data connection may not use that bucket",
            "InvalidAccessKeyId": "the store does not know AWS_ACCESS_KEY_ID: fix the data connection",
            "SignatureDoesNotMatch": "AWS_SECRET_ACCESS_KEY is wrong: fix the data connection",
        }.get(code, code or "check the path and the job's data connection or PVC")
        return CheckpointError(f"cannot {action} {where}: {fix}: {e}")

    def names(self) -> list[str]:
        """The checkpoint folders (ckpt-*) directly under the place, complete or not."""
        if self.kind == "file":
            try:
                return sorted(n for n in os.listdir(self.key) if n.startswith(PREFIX) and os.path.isdir(os.path.join(self.key, n)))
            except FileNotFoundError:
                return []
            except OSError as e:
                raise self._fail("list", self.uri, e) from e
        out: list[str] = []
        try:
            pages = self._s3().get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self.key, Delimiter="/")
            for page in pages:
                for p in page.get("CommonPrefixes") or []:
                    n = p["Prefix"][len(self.key):].rstrip("/")
                    if n.startswith(PREFIX):
                        out.append(n)
        except Exception as e:
            raise self._fail("list", self.uri, e) from e
        return sorted(out)

    def others(self) -> list[str]:
        """What else the place holds (to say what a wrong --resume-from points at)."""
        if self.kind == "file":
            try:
                return sorted(n for n in os.listdir(self.key) if not n.startswith((PREFIX, ".tmp-")))[:5]
            except OSError:
                return []
        try:
            page = self._s3().list_objects_v2(Bucket=self.bucket, Prefix=self.key, Delimiter="/", MaxKeys=20)
        except Exception:
            return []
        names = [o["Key"][len(self.key):] for o in page.get("Contents") or []]
        names += [p["Prefix"][len(self.key):] for p in page.get("CommonPrefixes") or []]
        return sorted(n for n in names if n and not n.startswith(PREFIX))[:5]

    def read(self, folder: str, name: str) -> bytes | None:
        """The file's bytes, or None when it is not there."""
        if self.kind == "file":
            try:
                with open(os.path.join(self.key, folder, name), "rb") as f:
                    return f.read()
            except FileNotFoundError:
                return None
            except OSError as e:
                raise self._fail("read", _join(self.uri, folder, name), e) from e
        try:
            body: bytes = self._s3().get_object(Bucket=self.bucket, Key=self.key + folder + "/" + name)["Body"].read()
            return body
        except Exception as e:
            code = (getattr(e, "response", {}) or {}).get("Error", {}).get("Code", "") if hasattr(e, "response") else ""
            if code in ("NoSuchKey", "404"):
                return None
            raise self._fail("read", _join(self.uri, folder, name), e) from e

    def write(self, folder: str, files: list[tuple[str, bytes]]) -> None:
        """Write the files of one checkpoint so that it appears whole: the last file (the
        manifest) is what makes it complete."""
        if self.kind == "file":
            tmp = os.path.join(self.key, f".tmp-{folder}-{os.getpid()}")
            final = os.path.join(self.key, folder)
            try:
                os.makedirs(self.key, exist_ok=True)
                shutil.rmtree(tmp, ignore_errors=True)
                os.makedirs(tmp)
                for name, data in files:
                    with open(os.path.join(tmp, name), "wb") as f:
                        f.write(data)
                        f.flush()
                        os.fsync(f.fileno())
                if os.path.exists(final):  # the same epoch and step again (a stop right after a save)
                    old = final + f".old-{os.getpid()}"
                    os.rename(final, old)
                    os.rename(tmp, final)
                    shutil.rmtree(old, ignore_errors=True)
                else:
                    os.rename(tmp, final)
                fd = os.open(self.key, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            except OSError as e:
                shutil.rmtree(tmp, ignore_errors=True)
                raise self._fail("write", _join(self.uri, folder), e) from e
            return
        try:
            s3 = self._s3()
            # A manifest from an earlier write of the same folder goes first, so that the folder
            # is incomplete, not torn, until the new manifest lands.
            s3.delete_object(Bucket=self.bucket, Key=self.key + folder + "/" + MANIFEST)
            for name, data in files:
                s3.put_object(Bucket=self.bucket, Key=self.key + folder + "/" + name, Body=data)
        except Exception as e:
            raise self._fail("write", _join(self.uri, folder), e) from e

    def delete(self, folder: str) -> None:
        if self.kind == "file":
            path = os.path.join(self.key, folder)
            # Renamed away first: a half-deleted folder never looks like a checkpoint.
            gone = os.path.join(self.key, f".tmp-deleted-{folder}-{os.getpid()}")
            try:
                os.rename(path, gone)
            except OSError:
                return
            shutil.rmtree(gone, ignore_errors=True)
            return
        s3 = self._s3()
        try:
            s3.delete_object(Bucket=self.bucket, Key=self.key + folder + "/" + MANIFEST)
            keys = [o["Key"] for o in s3.list_objects_v2(Bucket=self.bucket, Prefix=self.key + folder + "/").get("Contents") or []]
            for k in keys:
                s3.delete_object(Bucket=self.bucket, Key=k)
        except Exception as e:
            print(f"mpijob.checkpoint: could not delete the old checkpoint {_join(self.uri, folder)}: {e}", file=sys.stderr, flush=True)


# --- the state: a tree of dicts, lists, numbers, strings, tensors and arrays --------------------


def _is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "detach") and hasattr(x, "dtype")


def _is_tf(x: Any) -> bool:
    return "tensorflow" in type(x).__module__ and hasattr(x, "numpy") and hasattr(x, "dtype")


def _encode(state: Any) -> tuple[Any, dict[str, Any]]:
    """The JSON tree and the arrays of a state; tensors and arrays are stored by NumPy, without pickle."""
    import numpy as np

    arrays: dict[str, Any] = {}

    def enc(x: Any, path: str) -> Any:
        if x is None or isinstance(x, (bool, str)):
            return x
        if isinstance(x, int):
            return x
        if isinstance(x, float):
            return x if math.isfinite(x) else {"__float__": repr(x)}
        if isinstance(x, bytes):
            return {"__bytes__": base64.b64encode(x).decode()}
        if _is_torch(x):
            t = x.detach().cpu()
            dtype = str(t.dtype)
            if dtype == "torch.bfloat16":
                t = t.float()
            key = f"a{len(arrays)}"
            arrays[key] = t.numpy()
            return {"__torch__": key, "dtype": dtype}
        if _is_tf(x):
            key = f"a{len(arrays)}"
            arrays[key] = np.asarray(x.numpy())
            return {"__ndarray__": key}
        if isinstance(x, np.ndarray):
            if x.dtype == object:
                raise CheckpointError(f"cannot store the object array at {path}: store numbers, strings, lists, dicts, tensors and arrays")
            key = f"a{len(arrays)}"
            arrays[key] = x
            return {"__ndarray__": key}
        if isinstance(x, np.generic):
            return enc(x.item(), path)
        if isinstance(x, tuple):
            return {"__tuple__": [enc(v, f"{path}[{i}]") for i, v in enumerate(x)]}
        if isinstance(x, list):
            return [enc(v, f"{path}[{i}]") for i, v in enumerate(x)]
        if isinstance(x, dict):
            items = []
            for k, v in x.items():
                if not isinstance(k, (str, int, float, bool)) and k is not None:
                    raise CheckpointError(f"cannot store the key {k!r} at {path}: use string or number keys")
                items.append([k, enc(v, f"{path}[{k!r}]")])
            return {"__dict__": items}
        raise CheckpointError(f"cannot store {type(x).__name__} at {path}: store numbers, strings, lists, dicts, tensors and arrays "
                              "(a model's state_dict(), an optimizer's state_dict(), model.get_weights())")

    return enc(state, "state"), arrays


def _decode(tree: Any, arrays: Any) -> Any:
    def dec(x: Any) -> Any:
        if isinstance(x, list):
            return [dec(v) for v in x]
        if not isinstance(x, dict):
            return x
        if "__dict__" in x:
            return {k: dec(v) for k, v in x["__dict__"]}
        if "__tuple__" in x:
            return tuple(dec(v) for v in x["__tuple__"])
        if "__float__" in x:
            return float(x["__float__"])
        if "__bytes__" in x:
            return base64.b64decode(x["__bytes__"])
        if "__ndarray__" in x:
            return arrays[x["__ndarray__"]]
        if "__torch__" in x:
            import torch

            t = torch.from_numpy(arrays[x["__torch__"]].copy())
            dtype = getattr(torch, x.get("dtype", "").replace("torch.", ""), None)
            return t.to(dtype) if dtype is not None and t.dtype != dtype else t
        return {k: dec(v) for k, v in x.items()}

    return dec(tree)


def _shapes(state: Any) -> list[tuple[str, tuple[int, ...], str]]:
    """(name, shape, dtype) of every tensor and array under the state's model part."""
    import numpy as np

    part = state.get("model", state) if isinstance(state, dict) else state
    out: list[tuple[str, tuple[int, ...], str]] = []

    def walk(x: Any, path: str) -> None:
        if _is_torch(x):
            out.append((path, tuple(int(d) for d in x.shape), str(x.dtype).replace("torch.", "")))
        elif _is_tf(x) or isinstance(x, np.ndarray):
            out.append((path, tuple(int(d) for d in x.shape), str(np.asarray(x).dtype)))
        elif isinstance(x, dict):
            for k, v in x.items():
                walk(v, f"{path}.{k}" if path else str(k))
        elif isinstance(x, (list, tuple)):
            for i, v in enumerate(x):
                walk(v, f"{path}[{i}]")

    walk(part, "")
    return out


def fingerprint(state: Any) -> tuple[str, str]:
    """A model's identity (SHA-256 of its tensors' names, shapes and dtypes) and a line about it."""
    shapes = _shapes(state)
    h = hashlib.sha256(json.dumps([[n, list(s), d] for n, s, d in shapes]).encode()).hexdigest()[:16]
    values = sum(math.prod(s) for _, s, _ in shapes)
    return h, f"{len(shapes)} tensors, {values:,} values"


def _describe_difference(theirs: list[Any], ours: list[tuple[str, tuple[int, ...], str]]) -> str:
    t = {n: (tuple(s), d) for n, s, d in theirs}
    o = {n: (s, d) for n, s, d in ours}
    for n in sorted(set(t) | set(o)):
        if n not in o:
            return f"the checkpoint has {n or 'a tensor'} {_shape(t[n][0])}, this model does not"
        if n not in t:
            return f"this model has {n or 'a tensor'} {_shape(o[n][0])}, the checkpoint does not"
        if t[n] != o[n]:
            return f"{n or 'a tensor'} is {_shape(t[n][0])} {t[n][1]} in the checkpoint, {_shape(o[n][0])} {o[n][1]} in this model"
    return "their tensors differ"


def _shape(s: tuple[int, ...]) -> str:
    return "x".join(str(d) for d in s) or "scalar"


# --- the public calls ------------------------------------------------------------------------


def place(uri: str | None = None) -> str:
    """The checkpoint place: ``uri``, else ``$MPIJOB_CHECKPOINT_URI``; CheckpointError when neither."""
    where = uri or os.environ.get(CHECKPOINT_ENV, "")
    if not where:
        raise CheckpointError(f"no checkpoint place: ${CHECKPOINT_ENV} is unset (the job has no data connection or PVC): "
                              "create the job with --data-connection or --pvc, or pass uri=")
    return where


def _folder(epoch: int, step: int) -> str:
    return f"{PREFIX}{epoch:06d}-{step:09d}"


def save(state: Any, *, epoch: int, step: int = 0, total_epochs: int | None = None, uri: str | None = None,
         keep: int = DEFAULT_KEEP, metadata: dict[str, Any] | None = None) -> Checkpoint:
    """Write ``state`` as the checkpoint of ``epoch`` (and ``step``) under the checkpoint place,
    whole or not at all, then delete all but the newest ``keep``. Call it on one rank (rank 0):
    data-parallel ranks hold the same weights."""
    import numpy as np

    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
        raise CheckpointError(f"epoch {epoch!r}: use the number of the epoch just finished, 0 or more")
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise CheckpointError(f"step {step!r}: use 0 or more")
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
        raise CheckpointError(f"keep {keep!r}: keep at least 1 checkpoint")
    store = _Store(place(uri))
    tree, arrays = _encode(state)
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    files = [(ARRAYS, buf.getvalue()), (TREE, json.dumps(tree, separators=(",", ":")).encode())]
    model, summary = fingerprint(state)
    written = _dt.datetime.now(_dt.timezone.utc)
    manifest = {
        "format": FORMAT, "epoch": epoch, "step": step, "total_epochs": total_epochs,
        "written": written.isoformat().replace("+00:00", "Z"), "model": model, "summary": summary,
        "shapes": [[n, list(s), d] for n, s, d in _shapes(state)],
        "job": os.environ.get("MPIJOB_JOB_NAME", ""), "metadata": metadata or {},
        "files": {n: {"size": len(b), "sha256": hashlib.sha256(b).hexdigest()} for n, b in files},
    }
    folder = _folder(epoch, step)
    store.write(folder, [*files, (MANIFEST, json.dumps(manifest, indent=1).encode())])
    done = [n for n in store.names() if n <= folder]
    complete = [n for n in done if store.read(n, MANIFEST) is not None]
    for old in complete[:-keep]:
        store.delete(old)
    return Checkpoint(uri=_join(store.uri, folder) + "/", epoch=epoch, step=step, written=written, total_epochs=total_epochs,
                      model=model, summary=summary, metadata=metadata or {})


def _manifest(store: _Store, folder: str) -> dict[str, Any] | None:
    raw = store.read(folder, MANIFEST)
    if raw is None:
        return None
    try:
        m = json.loads(raw)
    except ValueError:
        raise CheckpointError(f"{_join(store.uri, folder, MANIFEST)} is not a checkpoint manifest (not JSON): "
                              "delete the folder, or point at a folder mpijob.checkpoint.save wrote") from None
    if not isinstance(m, dict) or m.get("format") != FORMAT:
        got = m.get("format") if isinstance(m, dict) else None
        raise CheckpointError(f"{_join(store.uri, folder)} is a checkpoint of format {got!r}, not {FORMAT}: "
                              "this program cannot read it; point at a folder mpijob.checkpoint.save wrote")
    return m


def _info(store: _Store, folder: str, m: dict[str, Any]) -> Checkpoint:
    written = _dt.datetime.fromisoformat(str(m.get("written", "1970-01-01T00:00:00Z")).replace("Z", "+00:00"))
    return Checkpoint(uri=_join(store.uri, folder) + "/", epoch=int(m.get("epoch", 0)), step=int(m.get("step", 0)), written=written,
                      total_epochs=m.get("total_epochs"), model=str(m.get("model", "")), summary=str(m.get("summary", "")),
                      metadata=dict(m.get("metadata") or {}))


def list_checkpoints(uri: str | None = None) -> list[Checkpoint]:
    """The complete checkpoints under the place, oldest first (none when the place is empty)."""
    store = _Store(place(uri))
    out = []
    for n in store.names():
        m = _manifest(store, n)
        if m is not None:
            out.append(_info(store, n, m))
    return out


def _load(store: _Store, folder: str, m: dict[str, Any], like: Any) -> Loaded:
    import numpy as np

    where = _join(store.uri, folder)
    if like is not None:
        ours, summary = fingerprint(like)
        if m.get("model") and m["model"] != ours:
            why = _describe_difference(m.get("shapes") or [], _shapes(like))
            raise CheckpointError(f"{where} is a checkpoint of another model ({m.get('summary')}; this one has {summary}): {why}. "
                                  f"Nothing was loaded. Resume from a checkpoint of this model (--resume-from), or start "
                                  f"without one (a new job, or delete {store.uri})")
    data: dict[str, bytes] = {}
    for name, want in (m.get("files") or {}).items():
        b = store.read(folder, name)
        if b is None:
            raise _Torn(f"{where}: {name} is missing")
        if len(b) != want.get("size") or hashlib.sha256(b).hexdigest() != want.get("sha256"):
            raise _Torn(f"{where}: {name} has {len(b)} bytes that do not match its manifest ({want.get('size')} bytes)")
        data[name] = b
    if ARRAYS not in data or TREE not in data:
        raise _Torn(f"{where}: the manifest lists no {ARRAYS} or {TREE}")
    with np.load(io.BytesIO(data[ARRAYS]), allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    state = _decode(json.loads(data[TREE]), arrays)
    info = _info(store, folder, m)
    return Loaded(**{**info.__dict__, "state": state})


class _Torn(CheckpointError):
    pass


def load_latest(uri: str | None = None, *, like: Any = None, resume_from: str | None = None) -> Loaded | None:
    """The newest complete checkpoint of this job, else of ``$MPIJOB_RESUME_FROM`` (``resume_from``);
    None when the job has none and resumes from nothing (its first run).

    ``like`` is the program's own state (e.g. ``{"model": model.state_dict()}``): a checkpoint of
    another model is refused, naming the first tensor that differs. A torn checkpoint is refused
    with a message on stderr, and the newest complete one before it is taken. An empty or foreign
    ``$MPIJOB_RESUME_FROM`` raises CheckpointError: a job told to resume never starts from zero."""
    own = uri or os.environ.get(CHECKPOINT_ENV, "")
    if own:
        got = _newest(_Store(own), like)
        if got is not None:
            return got
    other = resume_from if resume_from is not None else os.environ.get(RESUME_ENV, "")
    if not other:
        return None
    store = _Store(other)
    got = _newest(store, like)
    if got is None:
        held = store.others()
        what = f" (it holds: {', '.join(held)})" if held else " (it is empty)"
        raise CheckpointError(f"{RESUME_ENV}={other} has no complete checkpoint{what}: --resume-from takes another job's name "
                              "or a folder that mpijob.checkpoint.save wrote, e.g. s3://BUCKET/JOB/checkpoints/")
    got.source = "resume"
    return got


def load_on_rank0(rank: int, bcast: Any, uri: str | None = None, *, like: Any = None) -> Loaded | None:
    """:func:`load_latest` read by rank 0 alone and sent to every rank with ``bcast`` (a callable
    that takes rank 0's object and returns it on every rank: ``lambda o: comm.bcast(o, root=0)``,
    ``hvd.broadcast_object``). A refused checkpoint raises CheckpointError on every rank, so no
    rank waits for rank 0 in a collective while rank 0 has stopped."""
    got: Loaded | None = None
    err = ""
    if rank == 0:
        try:
            got = load_latest(uri, like=like)
        except CheckpointError as e:
            err = str(e)
    sent: tuple[Loaded | None, str] = bcast((got, err))
    if sent[1]:
        raise CheckpointError(sent[1] if rank == 0 else "rank 0 refused the checkpoint (its error says why)")
    return sent[0]


def _newest(store: _Store, like: Any) -> Loaded | None:
    for folder in reversed(store.names()):
        m = _manifest(store, folder)
        if m is None:
            continue  # never finished: ignored
        try:
            return _load(store, folder, m, like)
        except _Torn as e:
            print(f"mpijob.checkpoint: refused a torn checkpoint, taking the one before: {e}", file=sys.stderr, flush=True)
    return None


def resumed_report(got: Loaded, now: _dt.datetime | None = None) -> dict[str, Any]:
    """The ``resumed`` part of a progress report (docs/progress.md) for a loaded checkpoint."""
    r: dict[str, Any] = {"epoch": got.epoch, "step": got.step, "age_seconds": max(0, round(got.age_seconds(now)))}
    if got.source == "resume":
        r["from"] = got.uri
    return r


# --- random state and a stop on SIGTERM --------------------------------------------------------


def rng_state() -> dict[str, Any]:
    """Python's, NumPy's and (when loaded) PyTorch's random state, to save with the weights."""
    out: dict[str, Any] = {"python": random.getstate()}
    try:
        import numpy as np

        out["numpy"] = np.random.get_state()
    except ImportError:
        pass
    torch = sys.modules.get("torch")
    if torch is not None:
        out["torch"] = torch.get_rng_state()
    return out


def set_rng_state(s: dict[str, Any]) -> None:
    """Restore what :func:`rng_state` returned."""
    if "python" in s:
        v, internal, gauss = s["python"]
        random.setstate((v, tuple(internal), gauss))
    if "numpy" in s:
        import numpy as np

        np.random.set_state(tuple(s["numpy"]))
    if "torch" in s and sys.modules.get("torch") is not None:
        sys.modules["torch"].set_rng_state(s["torch"])


class StopOnSignal:
    """Notes SIGTERM (a preemption, a suspend, a drained node) instead of dying at once, so the
    program saves a checkpoint and stops within the pod's grace period.

    ``requested(comm)`` is True on every rank at the same step once any rank got the signal
    (an MPI allreduce of the flag; without ``comm``, this process's flag alone). After the
    save, ``finish(comm)`` holds every rank until it is written."""

    def __init__(self, signals: tuple[int, ...] = (signal.SIGTERM,)):
        self._got = False
        for s in signals:
            signal.signal(s, self._note)

    def _note(self, signum: int, frame: Any) -> None:
        if not self._got:
            # os.write, not print: a handler that prints while the program is printing to the
            # same stream raises "reentrant call" inside the program's own print.
            os.write(2, f"mpijob.checkpoint: got signal {signum}: saving a checkpoint, then stopping\n".encode())
        self._got = True

    @property
    def got(self) -> bool:
        return self._got

    def requested(self, comm: Any = None) -> bool:
        if comm is None:
            return self._got
        if hasattr(comm, "allreduce") and type(comm).__module__.startswith("mpi4py"):
            from mpi4py import MPI

            return bool(comm.allreduce(1 if self._got else 0, op=MPI.MAX))
        # torch.distributed or Horovod: a callable that takes and returns an int
        return bool(comm(1 if self._got else 0))

    def finish(self, comm: Any = None) -> None:
        """Call on every rank after the save and before exiting: no rank leaves before the
        checkpoint is written (mpirun ends the other ranks as soon as one exits non-zero)."""
        self.requested(comm)
