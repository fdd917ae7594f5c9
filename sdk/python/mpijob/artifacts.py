"""Reading a job's artifacts from its data connection (``s3://BUCKET/JOB/``) with boto3."""

from __future__ import annotations

import os
import posixpath
from typing import Any

from .errors import InvalidJobError, MPIJobError


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


def list_and_download(connection: str, data: dict[str, str], job: str, download_dir: str | None, files: list[str]) -> list[dict[str, Any]]:
    s3 = _client(data)
    bucket, prefix = data["AWS_S3_BUCKET"].strip(), job + "/"
    out: list[dict[str, Any]] = []
    try:
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for o in page.get("Contents", []):
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
    for o in picked:
        rel = posixpath.normpath(o["name"])
        if rel.startswith("../") or rel.startswith("/"):
            continue  # never write outside download_dir
        dst = os.path.join(download_dir, *rel.split("/"))
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
