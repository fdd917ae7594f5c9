"""Reading a job's artifacts: from its data connection (``s3://BUCKET/JOB/``) with boto3, or
from its PVC (``/mnt/CLAIM/JOB/``) through a short-lived reader pod, as pkg/artifacts does
(the reader's spec and the listing format are checked against pkg/artifacts/testdata/reader.json)."""

from __future__ import annotations

import base64
import copy
import datetime
import os
import posixpath
import time
import unicodedata
from collections.abc import Callable, Iterator
from typing import Any

from . import dataconn as _dataconn
from .errors import InvalidJobError, MPIJobError, PermissionDeniedError

#: Marks the short-lived pods that read a job's artifacts off a PVC; its value is the job's name.
READER_LABEL = "mpijob.dev/artifacts-reader"
#: A reader its caller never deleted ends on its own after this many seconds.
READER_LIFETIME = 600

# Go: artifacts.ListScript. Its programs come from the image's folders by a fixed PATH, and the claim is mounted
# under READER_MOUNT_ROOT, on no search path: nothing the job wrote can stand in for them.
_LIST_SCRIPT = """PATH=/usr/bin:/bin; export PATH; [ -d "$1" ] || exit 0; cd "$1" && find . -type f -printf '%s %T@ %P\\0'"""
# Go: artifacts.ReaderMountRoot: where a reader pod mounts the claim, whatever path the job's pods used.
READER_MOUNT_ROOT = "/mpijob-artifacts"


def name_problem(name: str) -> str:
    """Why an artifact's name cannot be written under a download folder; "" when it can (Go: artifacts.NameProblem,
    shared vectors in pkg/artifacts/testdata/names.json). Such a file is skipped; the others are still written."""
    if name == "":
        return "is empty"
    for ch in name:
        if unicodedata.category(ch) == "Cc" or ch in "\u2028\u2029":
            return f"has the control character U+{ord(ch):04X}"
        if unicodedata.category(ch) == "Cf":
            return f"has the invisible format character U+{ord(ch):04X}"
        if ch == "\\":
            return "has a backslash"
    if name.startswith("/"):
        return "starts at the root (/)"
    for part in name.split("/"):
        if part == "..":
            return "climbs out of the job's folder (..)"
        if part in (".", ""):
            return "has an empty or '.' folder"
        if part.startswith("."):
            return "is hidden (a file or folder starting with '.', such as .git or .bashrc, changes what tools in the folder do)"
    return ""


def _client(data: dict[str, str]) -> Any:
    try:
        import boto3
    except ImportError:
        raise MPIJobError("reading artifacts needs boto3: pip install 'mpijob[s3]'") from None
    return boto3.client(
        "s3", endpoint_url=data.get("AWS_S3_ENDPOINT", "").strip() or None,
        region_name=data.get("AWS_DEFAULT_REGION", "").strip() or "us-east-1",
        aws_access_key_id=data.get("AWS_ACCESS_KEY_ID", "").strip(),
        aws_secret_access_key=data.get("AWS_SECRET_ACCESS_KEY", "").strip())


def _explain(connection: str, data: dict[str, str], e: Exception) -> MPIJobError:
    code = getattr(e, "response", {}).get("Error", {}).get("Code", "") if hasattr(e, "response") else ""
    ep, bucket = data.get("AWS_S3_ENDPOINT", ""), data.get("AWS_S3_BUCKET", "")
    if code == "NoSuchBucket":
        return MPIJobError(f"data connection {connection}: bucket {bucket} does not exist at {ep}: fix AWS_S3_BUCKET in the connection")
    if code in ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch"):
        return MPIJobError(f"data connection {connection}: {ep} refused the keys for bucket {bucket} ({code}): "
                           "fix AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the connection")
    if not code:
        return MPIJobError(f"data connection {connection}: cannot reach {ep}: {e} (check AWS_S3_ENDPOINT in the connection)")
    return MPIJobError(f"data connection {connection}: {ep}: {e}")


def _refuse_overwrite(picked: list[dict[str, Any]], download_dir: str) -> None:
    """Nothing already in download_dir is replaced unless asked (Go: the CLI's --overwrite)."""
    there = [dst for o in picked if not name_problem(o["name"])
             for dst in [os.path.join(download_dir, *o["name"].split("/"))] if os.path.lexists(dst)]
    if there:
        more = f" (and {len(there) - 1} more)" if len(there) > 1 else ""
        raise InvalidJobError(f"download_dir {download_dir!r}: {there[0]} already exists{more}: nothing was downloaded; "
                              "pass overwrite=True to replace, or download into another folder", field="overwrite")


def list_and_download(connection: str, data: dict[str, str], job: str, download_dir: str | None, files: list[str],
                      overwrite: bool = False) -> list[dict[str, Any]]:
    s3 = _client(data)
    bucket, prefix = data["AWS_S3_BUCKET"].strip(), job + "/"
    out: list[dict[str, Any]] = []
    try:
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for o in page.get("Contents", []):
                if is_checkpoint(o["Key"][len(prefix):]):
                    continue
                out.append({"name": o["Key"][len(prefix):], "size": o["Size"], "last_modified": o["LastModified"],
                            "uri": f"s3://{bucket}/{o['Key']}"})
    except Exception as e:
        raise _explain(connection, data, e) from None
    out.sort(key=lambda o: o["name"])
    if download_dir is None:
        if files:
            raise InvalidJobError("files= needs download_dir= too", field="files")
        return out
    have = {o["name"] for o in out}
    missing = [f for f in files if f not in have]
    if missing:
        raise InvalidJobError(f"files {missing!r}: s3://{bucket}/{prefix} has no such artifact; it has {sorted(have)}", field="files")
    picked = [o for o in out if not files or o["name"] in files]
    if not overwrite:
        _refuse_overwrite(picked, download_dir)
    for o in picked:
        if why := name_problem(o["name"]):
            o["skipped"] = f"the name {why}, so it is not written under {download_dir}"
            continue  # never write outside download_dir; the other files still are
        dst = os.path.join(download_dir, *o["name"].split("/"))
        os.makedirs(os.path.dirname(dst) or ".", exist_ok=True)
        tmp = dst + ".part"
        try:
            s3.download_file(bucket, prefix + o["name"], tmp)
        except Exception as e:
            if os.path.exists(tmp):
                os.remove(tmp)
            raise _explain(connection, data, e) from None
        os.replace(tmp, dst)
        o["path"] = dst
    return picked


def reader_template(spec: dict[str, Any]) -> dict[str, Any]:
    """The pod spec a PVC reader borrows from: the Launcher's (a CPU pod), else the Worker's."""
    out: dict[str, Any] = {}
    for rj in ((spec.get("template") or {}).get("spec") or {}).get("replicatedJobs") or []:
        pod = rj["template"]["spec"]["template"]["spec"]
        if rj["name"] == "launcher":
            return dict(pod)
        if rj["name"] == "node":
            out = pod
    return dict(out)


def reader_pod_spec(template: dict[str, Any], claim: str, mount: str) -> dict[str, Any]:
    """The pod spec of a reader of ``claim`` mounted at ``mount``: the template's image, security
    context, node selector and tolerations, the claim read-only, small resources, a sleep that ends."""
    template = copy.deepcopy(template)
    image, csc = "", None
    for c in template.get("containers") or []:
        if c.get("name") == "node" or not image:
            image, csc = c.get("image", ""), c.get("securityContext")
    if csc is None:
        csc = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    csc["readOnlyRootFilesystem"] = True
    psc = template.get("securityContext") or {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    vol = _dataconn.volume_name(claim)
    out: dict[str, Any] = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 0,
        "activeDeadlineSeconds": READER_LIFETIME + 60,
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": psc,
        "containers": [{
            "name": "reader", "image": image, "imagePullPolicy": "IfNotPresent",
            "command": ["sleep", str(READER_LIFETIME)],
            "securityContext": csc,
            "volumeMounts": [{"name": vol, "mountPath": mount, "readOnly": True}],
            "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"cpu": "1", "memory": "256Mi"}},
        }],
        "volumes": [{"name": vol, "persistentVolumeClaim": {"claimName": claim, "readOnly": True}}],
    }
    for k in ("nodeSelector", "tolerations", "imagePullSecrets"):
        if template.get(k):
            out[k] = template[k]
    return out


def is_checkpoint(name: str) -> bool:
    """Go's ``artifacts.IsCheckpoint``: the job's checkpoints (``checkpoints/``) are not artifacts."""
    return name.startswith("checkpoints/")


def parse_find(out: str) -> list[dict[str, Any]]:
    """find's ``SIZE MTIME PATH\\0`` records, sorted by name."""
    objs: list[dict[str, Any]] = []
    for rec in out.split("\x00"):
        if not rec:
            continue
        f = rec.split(" ", 2)
        if len(f) != 3:
            raise MPIJobError(f"unexpected listing line {rec!r}")
        try:
            size, secs = int(f[0]), float(f[1])
        except ValueError:
            raise MPIJobError(f"unexpected listing line {rec!r}") from None
        objs.append({"name": f[2], "size": size,
                     "last_modified": datetime.datetime.fromtimestamp(secs, datetime.timezone.utc)})
    objs.sort(key=lambda o: o["name"])
    return objs


class PVCReader:
    """A reader pod for ``claim``, started as the user, owned by the TrainJob, deleted on close."""

    def __init__(self, backend: Any, tj: dict[str, Any], template: dict[str, Any], pvc: _dataconn.PVC,
                 say: Callable[[str], None] | None = None):
        self.backend, self.tj, self.pvc, self.say = backend, tj, pvc, say
        mount = f"{READER_MOUNT_ROOT}/{pvc.claim}"
        self.dir = posixpath.join(mount, tj["metadata"]["name"])
        self.uri = f"pvc://{pvc.claim}/{tj['metadata']['name']}/"
        self.spec = reader_pod_spec(template, pvc.claim, mount)
        self.pod = ""

    def __enter__(self) -> PVCReader:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.pod:
            self.backend.delete_pod(self.pod)
            self.pod = ""

    def _start(self) -> str:
        if self.pod:
            return self.pod
        job = self.tj["metadata"]["name"]
        if self.say:
            self.say(f"Starting a pod that mounts PVC {self.pvc.claim} read-only to read the artifacts of job {job} ...")
        body = {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": f"{job}-artifacts-", "labels": {READER_LABEL: job},
                         "ownerReferences": [{"apiVersion": self.tj["apiVersion"], "kind": self.tj["kind"],
                                              "name": job, "uid": self.tj["metadata"].get("uid", "")}]},
            "spec": self.spec,
        }
        try:
            self.pod = self.backend.create_pod(body)
        except PermissionDeniedError as e:
            raise PermissionDeniedError(
                f"job {job} wrote its artifacts to PVC {self.pvc.claim}, and reading a claim takes a short-lived pod "
                f"that mounts it read-only, which you may not create here: ask for a role that creates pods and "
                f"pods/exec (edit has both): {e}") from None
        deadline, why = time.monotonic() + 120, "Pending"
        while time.monotonic() < deadline:
            phase, why = self.backend.pod_state(self.pod)
            if phase == "Running":
                return self.pod
            if phase in ("Failed", "Succeeded"):
                break
            time.sleep(0.3)
        raise MPIJobError(f"the pod {self.pod} that reads PVC {self.pvc.claim} did not start within 2m: {why}")

    def list(self) -> list[dict[str, Any]]:
        out = "".join(self.backend.exec_pod(self._start(), "reader", ["/bin/sh", "-c", _LIST_SCRIPT, "list", self.dir]))
        objs = [o for o in parse_find(out) if not is_checkpoint(o["name"])]
        for o in objs:
            o["uri"] = self.uri + o["name"]
        return objs

    def download(self, name: str, dst: str) -> None:
        """Copy one file (named as list() shows it) to ``dst``, through base64 (exec's channel is text)."""
        with open(dst, "wb") as f:
            for chunk in _b64_stream(self.backend.exec_pod(self._start(), "reader", ["/usr/bin/base64", "-w0", "--", posixpath.join(self.dir, name)])):
                f.write(chunk)


def _b64_stream(chunks: Iterator[str]) -> Iterator[bytes]:
    rest = ""
    for c in chunks:
        rest += c.strip()
        cut = len(rest) - len(rest) % 4
        if cut:
            yield base64.b64decode(rest[:cut])
            rest = rest[cut:]
    if rest:
        yield base64.b64decode(rest)


def list_and_download_pvc(reader: PVCReader, download_dir: str | None, files: list[str], overwrite: bool = False) -> list[dict[str, Any]]:
    out = reader.list()
    if download_dir is None:
        if files:
            raise InvalidJobError("files= needs download_dir= too", field="files")
        return out
    have = {o["name"] for o in out}
    missing = [f for f in files if f not in have]
    if missing:
        raise InvalidJobError(f"files {missing!r}: {reader.uri} has no such artifact; it has {sorted(have)}", field="files")
    picked = [o for o in out if not files or o["name"] in files]
    if not overwrite:
        _refuse_overwrite(picked, download_dir)
    for o in picked:
        if why := name_problem(o["name"]):
            o["skipped"] = f"the name {why}, so it is not written under {download_dir}"
            continue  # never write outside download_dir; the other files still are
        dst = os.path.join(download_dir, *o["name"].split("/"))
        os.makedirs(os.path.dirname(dst) or ".", exist_ok=True)
        tmp = dst + ".part"
        try:
            reader.download(o["name"], tmp)
        except BaseException:
            if os.path.exists(tmp):
                os.remove(tmp)
            raise
        os.replace(tmp, dst)
        o["path"] = dst
    return picked
