"""Data connections, mirrored from Go's ``pkg/dataconn``: OpenShift AI's S3
connection Secrets and the PVCs a job mounts. Pure: it checks a Secret a
caller read and says which variables and volumes carry a connection into a
job's pods, always as references to the Secret, never as its values.

Both sides are checked against ``pkg/dataconn/testdata/connections.json``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

DASHBOARD_LABEL = "opendatahub.io/dashboard"
CONNECTION_TYPE_ANNOTATION = "opendatahub.io/connection-type"
CONNECTION_TYPE_REF_ANNOTATION = "opendatahub.io/connection-type-ref"
TYPE_S3 = "s3"

ACCESS_KEY_ID = "AWS_ACCESS_KEY_ID"
SECRET_ACCESS_KEY = "AWS_SECRET_ACCESS_KEY"
REGION = "AWS_DEFAULT_REGION"
ENDPOINT = "AWS_S3_ENDPOINT"
BUCKET = "AWS_S3_BUCKET"
#: The keys of an S3 connection, in the order jobs get them.
KEYS = (ACCESS_KEY_ID, SECRET_ACCESS_KEY, REGION, ENDPOINT, BUCKET)
#: The keys a job needs; a missing region means us-east-1.
REQUIRED = (ACCESS_KEY_ID, SECRET_ACCESS_KEY, ENDPOINT, BUCKET)

CONNECTIONS_ENV = "MPIJOB_DATA_CONNECTIONS"
JOB_NAME_ENV = "MPIJOB_JOB_NAME"
OUTPUT_ENV = "MPIJOB_OUTPUT_URI"
#: The job's checkpoint place: checkpoints/ under its artifacts.
CHECKPOINT_ENV = "MPIJOB_CHECKPOINT_URI"
#: Where a job with no checkpoint of its own takes its first (--resume-from).
RESUME_ENV = "MPIJOB_RESUME_FROM"
CHECKPOINT_DIR = "checkpoints/"
FORWARD_ENV = "OMPI_MCA_mca_base_env_list"

_DNS_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


@dataclass
class PVC:
    """A PersistentVolumeClaim mounted on the Launcher and every Worker."""

    claim: str
    mount_path: str = ""

    @classmethod
    def parse(cls, v: Any) -> PVC:
        """``"claim"``, ``"claim:/path"``, a dict or a PVC."""
        if isinstance(v, PVC):
            return v
        if isinstance(v, dict):
            return cls(claim=v.get("claim", ""), mount_path=v.get("mount_path", ""))
        claim, _, path = str(v).partition(":")
        return cls(claim=claim, mount_path=path)

    def to_dict(self) -> dict[str, str]:
        d = {"claim": self.claim}
        if self.mount_path:
            d["mount_path"] = self.mount_path
        return d


@dataclass
class ConfigMap:
    """A ConfigMap mounted read-only on the Launcher and every Worker, each key a file."""

    name: str
    mount_path: str = ""

    @classmethod
    def parse(cls, v: Any) -> ConfigMap:
        """``"name"``, ``"name:/path"``, a dict or a ConfigMap."""
        if isinstance(v, ConfigMap):
            return v
        if isinstance(v, dict):
            return cls(name=v.get("name", ""), mount_path=v.get("mount_path", ""))
        name, _, path = str(v).partition(":")
        return cls(name=name, mount_path=path)

    def to_dict(self) -> dict[str, str]:
        d = {"name": self.name}
        if self.mount_path:
            d["mount_path"] = self.mount_path
        return d


def default_config_map_path(name: str) -> str:
    return "/config/" + name


def config_map_path_of(c: ConfigMap) -> str:
    return c.mount_path or default_config_map_path(c.name)


def config_map_volume_name(name: str) -> str:
    n = "cm-" + name
    return n[:63].rstrip("-.") if len(n) > 63 else n


def validate_config_map(c: ConfigMap) -> str:
    if not c.name or len(c.name) > 253 or not _DNS_NAME.match(c.name):
        return "is not a ConfigMap name: use lower-case letters, digits, '-' and '.'"
    return _validate_mount_path(config_map_path_of(c))


class ConnectionProblem(ValueError):
    """What keeps a Secret from serving as a data connection."""

    def __init__(self, connection: str, key: str, problem: str):
        self.connection, self.key, self.problem = connection, key, problem
        where = f"data connection {connection!r}" + (f", key {key}" if key else "")
        super().__init__(f"{where}: {problem}")


def default_mount_path(claim: str) -> str:
    return "/mnt/" + claim


def mount_path_of(p: PVC) -> str:
    return p.mount_path or default_mount_path(p.claim)


def volume_name(claim: str) -> str:
    n = "pvc-" + claim
    return n[:63].rstrip("-.") if len(n) > 63 else n


def is_connection(labels: dict[str, str], annotations: dict[str, str]) -> bool:
    return (labels or {}).get(DASHBOARD_LABEL) == "true" and bool(
        (annotations or {}).get(CONNECTION_TYPE_ANNOTATION) or (annotations or {}).get(CONNECTION_TYPE_REF_ANNOTATION))


def type_of(annotations: dict[str, str]) -> str:
    a = annotations or {}
    return a.get(CONNECTION_TYPE_ANNOTATION) or a.get(CONNECTION_TYPE_REF_ANNOTATION) or ""


def check(name: str, secret: dict[str, Any] | None) -> ConnectionProblem | None:
    """Mirror of Go's ``dataconn.Check``: ``secret`` is the Secret as read
    (``data`` base64-decoded to str), or None when there is none."""
    if secret is None:
        return ConnectionProblem(name, "", f"no such data connection in this namespace: list them with kubectl get secrets -l {DASHBOARD_LABEL}=true")
    meta = secret.get("metadata") or {}
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    data = secret.get("data") or {}
    if not is_connection(labels, annotations):
        return ConnectionProblem(name, "", f"this Secret is not a data connection (label {DASHBOARD_LABEL}=true and annotation "
                                           f"{CONNECTION_TYPE_ANNOTATION}={TYPE_S3}): create the connection in the dashboard, or add the label and the annotation")
    t = type_of(annotations)
    if t != TYPE_S3:
        return ConnectionProblem(name, "", f'is a "{t}" connection; jobs take S3 connections (type {TYPE_S3})')
    for k in REQUIRED:
        if not str(data.get(k) or "").strip():
            return ConnectionProblem(name, k, f"is missing or empty: add it to the connection (edit it in the dashboard, or kubectl edit secret {name})")
    ep = str(data[ENDPOINT]).strip()
    u = urlparse(ep)
    if u.scheme not in ("http", "https") or not u.netloc:
        return ConnectionProblem(name, ENDPOINT, f'"{ep}" is not an endpoint URL: use e.g. https://s3.us-east-1.amazonaws.com or http://minio.storage.svc:9000')
    b = str(data[BUCKET]).strip()
    if len(b) < 3 or len(b) > 63 or not _DNS_NAME.match(b):
        return ConnectionProblem(name, BUCKET, f"\"{b}\" is not a bucket name: use 3 to 63 lower-case letters, digits, '-' and '.'")
    return None


def env_prefix(name: str, first: bool) -> str:
    return "" if first else name.upper().replace("-", "_").replace(".", "_") + "_"


def env(job: str, connections: list[str], pvcs: list[PVC]) -> list[dict[str, Any]]:
    """Mirror of Go's ``dataconn.Env``."""
    if not connections and not pvcs:
        return []
    out: list[dict[str, Any]] = []
    forward: list[str] = []
    for i, c in enumerate(connections):
        prefix = env_prefix(c, i == 0)
        for k in KEYS:
            ref: dict[str, Any] = {"name": c, "key": k}
            if k not in REQUIRED:
                ref["optional"] = True
            out.append({"name": prefix + k, "valueFrom": {"secretKeyRef": ref}})
            forward.append(prefix + k)
    if connections:
        out.append({"name": CONNECTIONS_ENV, "value": ",".join(connections)})
        forward.append(CONNECTIONS_ENV)
    out.append({"name": JOB_NAME_ENV, "value": job})
    forward.append(JOB_NAME_ENV)
    output = ""
    if connections:
        output = f"s3://$({BUCKET})/{job}/"
    elif pvcs:
        output = f"file://{mount_path_of(pvcs[0])}/{job}/"
    out.append({"name": OUTPUT_ENV, "value": output})
    forward.append(OUTPUT_ENV)
    out.append({"name": CHECKPOINT_ENV, "value": output + CHECKPOINT_DIR})
    forward.append(CHECKPOINT_ENV)
    out.append({"name": FORWARD_ENV, "value": ";".join(forward)})
    return out


def checkpoints_of(job: str, connections: list[str], pvcs: list[PVC]) -> str:
    """Mirror of Go's ``dataconn.CheckpointsOf``: job's checkpoint place on the first storage."""
    if connections:
        return f"s3://$({BUCKET})/{job}/{CHECKPOINT_DIR}"
    if pvcs:
        return f"file://{mount_path_of(pvcs[0])}/{job}/{CHECKPOINT_DIR}"
    return ""


def with_resume(env_vars: list[dict[str, Any]], uri: str) -> list[dict[str, Any]]:
    """Mirror of Go's ``dataconn.WithResume``."""
    if not uri:
        return env_vars
    out: list[dict[str, Any]] = []
    for e in env_vars:
        if e.get("name") == FORWARD_ENV and "valueFrom" not in e:
            out.append({"name": RESUME_ENV, "value": uri})
            e = {**e, "value": e["value"] + ";" + RESUME_ENV}
        out.append(e)
    return out


def resume_of(env_vars: list[dict[str, Any]]) -> str:
    for e in env_vars:
        if e.get("name") == RESUME_ENV and "valueFrom" not in e:
            return str(e.get("value") or "")
    return ""


def volumes(pvcs: list[PVC], config_maps: list[ConfigMap] | None = None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    vols: list[dict[str, Any]] = [{"name": volume_name(p.claim), "persistentVolumeClaim": {"claimName": p.claim}} for p in pvcs]
    mounts: list[dict[str, Any]] = [{"name": volume_name(p.claim), "mountPath": mount_path_of(p)} for p in pvcs]
    for c in config_maps or []:
        vols.append({"name": config_map_volume_name(c.name), "configMap": {"name": c.name}})
        mounts.append({"name": config_map_volume_name(c.name), "mountPath": config_map_path_of(c), "readOnly": True})
    return vols, mounts


def validate_pvc(p: PVC) -> str:
    if not p.claim or len(p.claim) > 253 or not _DNS_NAME.match(p.claim):
        return "is not a PersistentVolumeClaim name: use lower-case letters, digits, '-' and '.'"
    return _validate_mount_path(mount_path_of(p))


def _clean_path(mp: str) -> str:
    """Go's path.Clean for an absolute path without '..': no '//', no '.', no trailing '/'."""
    parts = [p for p in mp.split("/") if p not in ("", ".")]
    return "/" + "/".join(parts)


def _validate_mount_path(mp: str) -> str:
    if not mp.startswith("/") or ":" in mp or ".." in mp:
        return f'mount path "{mp}" must be an absolute path without \':\' or \'..\', e.g. /mnt/data'
    clean = _clean_path(mp)
    if clean != mp:
        # //etc and /./etc are /etc: judged as written, they slipped past.
        return f'mount path "{mp}" is {clean} written another way: write it plainly, without \'//\', \'/./\' or a trailing \'/\', e.g. /mnt/data'
    if mp == "/":
        return f'mount path "{mp}" would hide the whole file system of the pods: use a path under /mnt'
    for reserved in ("/home/mpiuser", "/proc", "/dev", "/sys", "/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc", "/opt/mpijob"):
        if mp == reserved or mp.startswith(reserved + "/"):
            return f'mount path "{mp}" would hide {reserved}, which the MPI runtime needs: use a path under /mnt'
    return ""


def connections_of(env_list: list[dict[str, Any]]) -> list[str]:
    for e in env_list or []:
        if e.get("name") == CONNECTIONS_ENV and not e.get("valueFrom") and e.get("value"):
            return str(e["value"]).split(",")
    return []
