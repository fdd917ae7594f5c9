"""Pure builders of the SDK: runtime patches, the job from its Input, what a runtime
says about its Workers. No API calls."""

from __future__ import annotations

from typing import Any

from . import jobspec as _jobspec
from .constants import PATCH_MANAGER
from .errors import InvalidJobError


def requirements(res: dict[str, str]) -> dict[str, Any]:
    # Memory and extended resources (GPUs) are limited; CPU is only requested.
    return {"requests": dict(res), "limits": {k: v for k, v in res.items() if k != "cpu"}}


def patch(node_selector: dict[str, str] | None, vols: list[tuple[dict[str, Any], dict[str, Any]]]) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if vols:
        spec["volumes"] = [v for v, _ in vols]
        spec["containers"] = [{"name": "node", "volumeMounts": [m for _, m in vols]}]
    return {"manager": PATCH_MANAGER, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
        {"name": rj, "template": {"spec": {"template": {"spec": spec}}}} for rj in ("launcher", "node")]}}}}


def launcher_hosts_ranks(rt: dict[str, Any]) -> bool:
    return bool((((rt.get("spec") or {}).get("mlPolicy") or {}).get("mpi") or {}).get("runLauncherAsNode"))


def worker_image(rt: dict[str, Any]) -> str:
    for rj in ((rt.get("spec") or {}).get("template") or {}).get("spec", {}).get("replicatedJobs") or []:
        if rj.get("name") == "node":
            for c in rj["template"]["spec"]["template"]["spec"].get("containers") or []:
                if c.get("name") == "node":
                    return str(c.get("image", ""))
    return ""


def build(inp: _jobspec.Input, base: dict[str, Any]) -> _jobspec.Job:
    try:
        return _jobspec.build(inp, base)
    except _jobspec.BuildError as e:
        # The builder names Input's fields; create_job's arguments for these are singular.
        arg = {"data_connections": "data_connection", "pvcs": "pvc", "config_maps": "config_map"}.get(e.field, e.field.split(".", 1)[0])
        msg = str(e).replace(e.field, arg, 1) if arg != e.field else str(e)
        raise InvalidJobError(msg, field=arg) from None


def offline_runtime(name: str) -> dict[str, Any]:
    """A stand-in MPI runtime for checking settings before the cluster is asked."""
    return {"metadata": {"name": name}, "spec": {"mlPolicy": {"mpi": {}}, "template": {"spec": {"replicatedJobs": []}}}}
