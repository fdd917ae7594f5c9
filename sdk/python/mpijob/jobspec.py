"""The job builder, mirrored from Go's ``pkg/jobspec``: what a user asks for
becomes the objects of one MPI job.

Trainer v2.3 applies a TrainJob's image only to the Launcher and its
``resourcesPerNode`` only to the Launcher (kubeflow/trainer#2650), so a job
that sets an image or resources gets a TrainingRuntime of its own, derived
from the ClusterTrainingRuntime the user chose; the TrainJob then owns it.

Both sides are checked against the shared vectors in
``pkg/jobspec/testdata/vectors``; a change to one that the other lacks
fails those tests. Pure: no API calls.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from . import dataconn

GROUP = "trainer.kubeflow.org"
VERSION = "v1alpha1"
PATCH_MANAGER = "mpijob.dev/job-builder"
DEFAULT_RUNTIME = "mpi-openmpi"
JOB_LABEL = "mpijob.dev/job"
BASE_RUNTIME_LABEL = "mpijob.dev/base-runtime"
# Beside BASE_RUNTIME_LABEL: "TrainingRuntime" when the base is a runtime of the job's own namespace.
BASE_RUNTIME_KIND_LABEL = "mpijob.dev/base-runtime-kind"
JOB_RUNTIME_FINALIZER = "mpijob.dev/job-runtime"
RUNTIME_LABEL = "mpijob.dev/runtime"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
MPI_IMPLEMENTATION = "mpijob.dev/mpi-implementation"
DESCRIPTION = "mpijob.dev/description"
# How long a job that can never finish is left before mpijob-manager ends it (a Go duration, or off).
END_STUCK_AFTER = "policy.mpijob.dev/end-stuck-after"
# Register the job's model in the model registry when it succeeds (NAME[:VERSION]; the file, when several).
REGISTER_MODEL = "mpijob.dev/register-model"
REGISTER_ARTIFACT = "mpijob.dev/register-artifact"
#: JobSet names the Launcher pod "<name>-launcher-0-0-xxxxx"; a hostname has at most 63.
MAX_NAME = 63 - len("-launcher-0-0-xxxxx")

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
_QUALIFIED = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# The image reference grammar of distribution/reference (what Go's
# go-containerregistry accepts): lower-case repository, optional tag and digest.
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*"
_DOMAIN = r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::[0-9]+)?)"
_IMAGE = re.compile(rf"^(?:{_DOMAIN}/)?{_COMPONENT}(?:/{_COMPONENT})*(?::[\w][\w.-]{{0,127}})?(?:@sha256:[0-9a-f]{{64}})?$")
_QUANTITY = re.compile(r"^([+-]?[0-9.]+)([eE][+-]?[0-9]+|[kMGTPE]i?|m|n|u)?$")


class BuildError(ValueError):
    """A bad input: ``field`` (Input's name, ``resources_per_worker.cpu`` for a
    resource), ``value`` and ``problem``; the same three Go's builder gives."""

    def __init__(self, field_: str, value: str, problem: str):
        self.field, self.value, self.problem = field_, value, problem
        super().__init__(f"{field_} {value!r}: {problem}" if value else f"{field_}: {problem}")


@dataclass
class Input:
    """What a user asks for (the snake_case names of the shared vectors)."""

    name: str
    runtime: str = DEFAULT_RUNTIME
    workers: int = 0
    namespace: str = ""
    slots_per_worker: int = 0
    image: str = ""
    launcher_image: str = ""
    worker_image: str = ""
    command: list[str] = field(default_factory=list)
    resources_per_worker: dict[str, str] = field(default_factory=dict)
    launcher_resources: dict[str, str] = field(default_factory=dict)
    env: list[dict[str, Any]] = field(default_factory=list)
    node_selector: dict[str, str] = field(default_factory=dict)
    queue: str = ""
    data_connections: list[str] = field(default_factory=list)
    pvcs: list[dataconn.PVC] = field(default_factory=list)
    config_maps: list[dataconn.ConfigMap] = field(default_factory=list)
    timeout: str = ""
    retries: int = 0
    resume_from: str = ""
    priority: str = ""
    tolerations: list[dict[str, Any]] = field(default_factory=list)
    image_pull_secrets: list[str] = field(default_factory=list)
    description: str = ""
    launcher_flags: list[str] = field(default_factory=list)
    end_stuck_after: str = ""
    grace_period: str = ""
    service_account: str = ""
    register_model: str = ""
    register_artifact: str = ""

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Input:
        kw = {k: v for k, v in d.items() if v is not None}
        if "pvcs" in kw:
            kw["pvcs"] = [dataconn.PVC.parse(p) for p in kw["pvcs"]]
        if "config_maps" in kw:
            kw["config_maps"] = [dataconn.ConfigMap.parse(c) for c in kw["config_maps"]]
        return cls(**kw)


@dataclass
class Job:
    """The objects of one job: the TrainJob, and its per-job runtime or None."""

    train_job: dict[str, Any]
    runtime: dict[str, Any] | None = None


def _err(f: str, v: Any, problem: str) -> BuildError:
    return BuildError(f, "" if v is None else str(v), problem)


def _launcher_as_node(base: dict[str, Any]) -> bool:
    return bool((((base.get("spec") or {}).get("mlPolicy") or {}).get("mpi") or {}).get("runLauncherAsNode"))


def _is_mpi(base: dict[str, Any] | None) -> bool:
    return bool(base and (((base.get("spec") or {}).get("mlPolicy") or {}).get("mpi") is not None))


def _example(k: str) -> str:
    return {"cpu": "4 or 500m", "memory": "16Gi or 300Mi", "ephemeral-storage": "16Gi or 300Mi"}.get(k, "1")


def _quantity(v: str) -> Decimal | None:
    m = _QUANTITY.match(v.strip())
    if not m:
        return None
    try:
        n = Decimal(m.group(1))
    except InvalidOperation:
        return None
    suffix = m.group(2) or ""
    scale = {"m": Decimal("0.001"), "u": Decimal("0.000001"), "n": Decimal("0.000000001"),
             "k": Decimal(1000), "M": Decimal(1000) ** 2, "G": Decimal(1000) ** 3, "T": Decimal(1000) ** 4,
             "P": Decimal(1000) ** 5, "E": Decimal(1000) ** 6, "Ki": Decimal(1024), "Mi": Decimal(1024) ** 2,
             "Gi": Decimal(1024) ** 3, "Ti": Decimal(1024) ** 4, "Pi": Decimal(1024) ** 5, "Ei": Decimal(1024) ** 6}
    if suffix[:1] in ("e", "E"):
        return n * (Decimal(10) ** int(suffix[1:]))
    return n * scale.get(suffix, Decimal(1))


# The least memory a Launcher or Worker may ask for (jobspec.MinMemory): sshd,
# mpirun and the kubelet's in-memory volumes need more than a few bytes, and a
# bare number is bytes.
MIN_MEMORY_BYTES = 32 * 1024 * 1024


def _parse_resources(f: str, res: dict[str, Any], worker: bool) -> dict[str, str]:
    out: dict[str, str] = {}
    for k in sorted(res):
        v = str(res[k])
        path = f"{f}.{k}"
        if k in ("cpu", "memory", "ephemeral-storage") or k.startswith("hugepages-"):
            pass
        elif "/" in k:
            if not _QUALIFIED.match(k) or len(k.split("/", 1)[1]) > 63:
                raise _err(path, v, f'"{k}" is not a resource name: use a domain and a name, e.g. nvidia.com/gpu')
            if not worker:
                raise _err(path, v, f"the Launcher runs mpirun and hosts no ranks: give {k} to the Workers (resources_per_worker)")
        else:
            hint = "nvidia.com/gpu or amd.com/gpu" if "gpu" in k.lower() else "cpu, memory or an extended resource such as nvidia.com/gpu"
            raise _err(path, v, f'no node offers a resource named "{k}": use {hint}')
        q = _quantity(v)
        if q is None or q < 0:
            raise _err(path, v, f"is not a quantity: use e.g. {_example(k)}")
        if q == 0 and k in ("cpu", "memory"):
            raise _err(path, v, f"must be more than 0: use e.g. {_example(k)}")
        if k == "memory" and q < MIN_MEMORY_BYTES:
            raise _err(path, v, "is less than 32Mi, too little for a pod (memory counts bytes unless it has a unit "
                                f"such as Mi or Gi): use e.g. {_example(k)}")
        if "/" in k and q != q.to_integral_value():
            raise _err(path, v, "must be a whole number of devices, e.g. 1")
        out[k] = v.strip()
    return out


def _validate(inp: Input, base: dict[str, Any] | None) -> None:
    n = inp.name
    if not n:
        raise _err("name", "", "is empty: give the job a name, e.g. hello")
    if len(n) > MAX_NAME:
        raise _err("name", n, f"is {len(n)} characters; use at most {MAX_NAME} (JobSet names the Launcher pod {n}-launcher-0-0-xxxxx, at most 63)")
    if not _DNS_LABEL.match(n):
        raise _err("name", n, "is not a valid job name: use lower-case letters, digits and '-', starting and ending with a letter or digit")
    if not _is_mpi(base):
        raise _err("runtime", (base or {}).get("metadata", {}).get("name", inp.runtime),
                   "is not an MPI runtime (it has no MPI policy): see kubectl mpijob runtimes list")
    if isinstance(inp.workers, bool) or not isinstance(inp.workers, int) or inp.workers < 1:
        raise _err("workers", inp.workers, "a job needs at least 1 Worker")
    if isinstance(inp.slots_per_worker, bool) or not isinstance(inp.slots_per_worker, int) or inp.slots_per_worker < 0:
        raise _err("slots_per_worker", inp.slots_per_worker, "use 1 or more (MPI ranks per Worker)")
    for f, v in (("image", inp.image), ("launcher_image", inp.launcher_image), ("worker_image", inp.worker_image)):
        if v and (not isinstance(v, str) or not _IMAGE.match(v)):
            raise _err(f, v, "is not an image reference: use e.g. ghcr.io/mpijob/openmpi:4.1 (lower-case repository, optional :tag or @sha256:digest)")
    if inp.command and "" in inp.command:
        raise _err("command", " ".join(inp.command), "has an empty argument")


def build(inp: Input, base: dict[str, Any] | None) -> Job:
    """Build the objects of one MPI job on ``base`` (a ClusterTrainingRuntime as a dict, or a
    namespace's own TrainingRuntime: its metadata then has the namespace). Raises :class:`BuildError` naming the first bad field."""
    _validate(inp, base)
    assert base is not None
    worker = _parse_resources("resources_per_worker", inp.resources_per_worker or {}, True)
    launcher = _parse_resources("launcher_resources", inp.launcher_resources or {}, False)
    base_name = base["metadata"]["name"]
    as_node = _launcher_as_node(base)
    if as_node and launcher:
        raise _err("launcher_resources", "", f"on runtime {base_name} the Launcher hosts ranks and is sized like every Worker: use resources_per_worker")
    for e in inp.env:
        if not _ENV_NAME.match(e.get("name", "")):
            raise _err("env", e.get("name", ""), "is not a valid variable name: use letters, digits, '_', '-' or '.', not starting with a digit")
        _check_env_source(e)
    for k, v in (inp.node_selector or {}).items():
        if not _QUALIFIED.match(k):
            raise _err("node_selector", k, "is not a valid label key: use e.g. disktype or nvidia.com/gpu.product")
        if len(v) > 63 or not _LABEL_VALUE.match(v):
            raise _err("node_selector", f"{k}={v}", "is not a valid label value: use at most 63 letters, digits, '-', '_' or '.'")
    if inp.queue and (len(inp.queue) > 253 or not _DNS_SUBDOMAIN.match(inp.queue)):
        raise _err("queue", inp.queue, "is not a valid LocalQueue name: use lower-case letters, digits, '-' and '.'")
    _validate_storage(inp)
    resume = _resume_uri(inp)
    deadline = _validate_scheduling(inp)
    grace = parse_grace_period(inp.grace_period)
    if inp.service_account and (not isinstance(inp.service_account, str) or len(inp.service_account) > 253
                                or not _DNS_SUBDOMAIN.match(inp.service_account)):
        raise _err("service_account", inp.service_account, "is not a ServiceAccount name: use lower-case letters, digits, '-' and '.' "
                                                           "(kubectl get serviceaccounts)")
    _validate_registration(inp)
    command = _with_launcher_flags(inp, base)

    meta: dict[str, Any] = {"name": inp.name}
    if inp.namespace:
        meta["namespace"] = inp.namespace
    trainer: dict[str, Any] = {"numNodes": inp.workers + 1 if as_node else inp.workers}
    if inp.slots_per_worker > 0:
        trainer["numProcPerNode"] = inp.slots_per_worker
    if command:
        trainer["command"] = command
    env: list[dict[str, Any]] = []
    for e in inp.env:
        var = _env_var(e)
        for i, have in enumerate(env):
            if have["name"] == e["name"]:
                env[i] = var
                break
        else:
            env.append(var)
    if env:
        trainer["env"] = env
    spec: dict[str, Any] = {"runtimeRef": {"apiGroup": GROUP, "kind": kind_of(base), "name": base_name}, "trainer": trainer}
    if deadline:
        spec["activeDeadlineSeconds"] = deadline
    if inp.queue:
        meta.setdefault("labels", {})[QUEUE_LABEL] = inp.queue
    if inp.priority:
        meta.setdefault("labels", {})[PRIORITY_LABEL] = inp.priority
    if inp.description:
        meta.setdefault("annotations", {})[DESCRIPTION] = inp.description
    if inp.end_stuck_after:
        meta.setdefault("annotations", {})[END_STUCK_AFTER] = inp.end_stuck_after
    if inp.register_model:
        meta.setdefault("annotations", {})[REGISTER_MODEL] = inp.register_model
        if inp.register_artifact:
            meta["annotations"][REGISTER_ARTIFACT] = inp.register_artifact
    if inp.node_selector or inp.tolerations or inp.image_pull_secrets:
        spec["runtimePatches"] = [pod_patch(inp.node_selector, inp.tolerations, inp.image_pull_secrets)]
    tj = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "TrainJob", "metadata": meta, "spec": spec}
    launcher_image = inp.launcher_image or inp.image
    worker_image = inp.worker_image or inp.image
    storage = bool(inp.data_connections or inp.pvcs)
    if not (launcher_image or worker_image or worker or launcher or storage or inp.config_maps or inp.retries or grace
            or inp.service_account):
        return Job(tj)
    rt = derive(base, inp.name, inp.namespace, launcher_image, worker_image, worker, launcher,
                env=dataconn.with_resume(dataconn.env(inp.name, list(inp.data_connections), list(inp.pvcs)), resume), pvcs=list(inp.pvcs),
                config_maps=list(inp.config_maps), retries=inp.retries, grace_period=grace,
                service_account=inp.service_account)
    spec["runtimeRef"] = {"apiGroup": GROUP, "kind": "TrainingRuntime", "name": inp.name}
    meta.setdefault("labels", {})[BASE_RUNTIME_LABEL] = base_name
    if is_namespaced(base):
        meta["labels"][BASE_RUNTIME_KIND_LABEL] = "TrainingRuntime"
    return Job(tj, rt)


def is_derived(labels: dict[str, str] | None) -> bool:
    """Mirror of Go's ``jobspec.IsDerived``: the labels of a per-job runtime mpijob made."""
    labels = labels or {}
    return bool(labels.get(JOB_LABEL) and labels.get(BASE_RUNTIME_LABEL))


def is_namespaced(base: dict[str, Any]) -> bool:
    """Mirror of Go's ``runtimes.IsNamespaced``: ``base`` is a TrainingRuntime of a namespace
    (its metadata has a namespace), not a ClusterTrainingRuntime."""
    return bool((base.get("metadata") or {}).get("namespace"))


def kind_of(base: dict[str, Any]) -> str:
    """The runtimeRef kind that names ``base``."""
    return "TrainingRuntime" if is_namespaced(base) else "ClusterTrainingRuntime"


def _resume_uri(inp: Input) -> str:
    """Mirror of Go's ``resumeURI``: the folder the job resumes from."""
    r = inp.resume_from
    if not r:
        return ""
    if not isinstance(r, str):
        raise _err("resume_from", r, "is neither a job name nor a URI: use another MPI job's name, s3://BUCKET/PATH/ or file:///PATH/")
    if not (inp.data_connections or inp.pvcs):
        raise _err("resume_from", r, "a job reads a checkpoint through its data connection or PVC, and this one has neither: "
                                     "add a data connection (--data-connection) or a PVC (--pvc)")
    if "://" in r:
        scheme, rest = r.split("://", 1)
        if scheme not in ("s3", "file"):
            raise _err("resume_from", r, "is not a checkpoint folder: use another job's name, s3://BUCKET/PATH/ or file:///PATH/")
        if scheme == "s3" and (rest.startswith("/") or "/" not in rest.rstrip("/")):
            raise _err("resume_from", r, "names no folder in a bucket: use s3://BUCKET/PATH/, e.g. s3://my-bucket/other-job/checkpoints/")
        if scheme == "file" and (not rest.startswith("/") or ".." in rest or rest == "/"):
            raise _err("resume_from", r, "is not an absolute folder: use file:///PATH/ on the job's PVC, e.g. file:///mnt/shared-data/other-job/checkpoints/")
        if any(c in r for c in " \t\n\"'$`"):
            raise _err("resume_from", r, "has a space, quote or '$': give the folder's URI as it is")
        return r if r.endswith("/") else r + "/"
    if not _DNS_LABEL.match(r) or len(r) > MAX_NAME:
        raise _err("resume_from", r, "is neither a job name nor a URI: use another MPI job's name, s3://BUCKET/PATH/ or file:///PATH/")
    if r == inp.name:
        raise _err("resume_from", r, "is this job: a job resumes from its own checkpoints by itself; name another job")
    return dataconn.checkpoints_of(r, list(inp.data_connections), list(inp.pvcs))


def _resume_input_of(uri: str, conns: list[str], pvcs: list[dataconn.PVC]) -> str:
    """Mirror of Go's ``resumeInputOf``."""
    if not uri:
        return ""
    head = tail = ""
    if conns:
        head, tail = f"s3://$({dataconn.BUCKET})/", "/" + dataconn.CHECKPOINT_DIR
    elif pvcs:
        head, tail = f"file://{dataconn.mount_path_of(pvcs[0])}/", "/" + dataconn.CHECKPOINT_DIR
    if head and uri.startswith(head) and uri.endswith(tail):
        job = uri[len(head):len(uri) - len(tail)]
        if job and "/" not in job:
            return job
    return uri


def _validate_storage(inp: Input) -> None:
    seen: set[str] = set()
    for c in inp.data_connections:
        if not isinstance(c, str) or len(c) > 253 or not _DNS_SUBDOMAIN.match(c):
            raise _err("data_connections", c, "is not a data connection name: use the connection's Secret name, lower-case letters, digits, '-' and '.' "
                                              f"(kubectl get secrets -l {dataconn.DASHBOARD_LABEL}=true)")
        if c in seen:
            raise _err("data_connections", c, "is named twice: name each data connection once")
        seen.add(c)
    # PVCs and ConfigMaps: a valid name and path, each named once, each path taken once.
    mounts = [("pvcs", p.claim + (":" + p.mount_path if p.mount_path else ""), p.claim, dataconn.mount_path_of(p),
               dataconn.validate_pvc(p), f"claim {p.claim} is named twice: mount each PVC once") for p in inp.pvcs]
    mounts += [("config_maps", cm.name + (":" + cm.mount_path if cm.mount_path else ""), cm.name, dataconn.config_map_path_of(cm),
                dataconn.validate_config_map(cm), f"ConfigMap {cm.name} is named twice: mount each ConfigMap once") for cm in inp.config_maps]
    named: set[str] = set()
    paths: set[str] = set()
    for fld, v, name, mp, problem, twice in mounts:
        if problem:
            raise _err(fld, v, problem)
        if f"{fld}/{name}" in named:
            raise _err(fld, v, twice)
        if mp in paths:
            taken = "another PVC or ConfigMap" if fld == "config_maps" else "another PVC"
            raise _err(fld, v, f"mount path {mp} is taken by {taken}: give each its own path")
        named.add(f"{fld}/{name}")
        paths.add(mp)


def derive(base: dict[str, Any], job: str, namespace: str, launcher_image: str, worker_image: str,
           worker: dict[str, str], launcher: dict[str, str], env: list[dict[str, Any]] | None = None,
           pvcs: list[dataconn.PVC] | None = None, config_maps: list[dataconn.ConfigMap] | None = None,
           retries: int = 0, grace_period: int | None = None, service_account: str = "") -> dict[str, Any]:
    """The per-job TrainingRuntime: ``base`` with the node containers' images and resources changed."""
    base_meta = base.get("metadata") or {}
    labels = {JOB_LABEL: job, BASE_RUNTIME_LABEL: base_meta["name"]}
    labels.update({k: v for k, v in (base_meta.get("labels") or {}).items()
                   if k not in labels and k not in (RUNTIME_LABEL, BASE_RUNTIME_KIND_LABEL)})
    if is_namespaced(base):
        labels[BASE_RUNTIME_KIND_LABEL] = "TrainingRuntime"
    annotations = {DESCRIPTION: f"runtime of MPI job {job}: {base_meta['name']} with the job's images and resources (deleted with the job)"}
    # The base's annotations (MPI implementation, runtime policy) hold for the
    # copy: the diagnosis reads them from the job's runtime.
    annotations.update({k: v for k, v in (base_meta.get("annotations") or {}).items() if k != DESCRIPTION})
    # Kept until the job is gone (mpijob-manager removes it): Trainer refuses
    # every update of a TrainJob whose runtime is missing.
    meta: dict[str, Any] = {"name": job, "labels": labels, "annotations": annotations, "finalizers": [JOB_RUNTIME_FINALIZER]}
    if namespace:
        meta["namespace"] = namespace
    spec = copy.deepcopy(base["spec"])
    if retries:
        spec["template"]["spec"].setdefault("failurePolicy", {})["maxRestarts"] = retries
    as_node = _launcher_as_node(base)
    for rj in spec["template"]["spec"]["replicatedJobs"]:
        if rj["name"] == "launcher":
            image, res = launcher_image, (worker if as_node else launcher)
        elif rj["name"] == "node":
            image, res = worker_image, worker
        else:
            continue
        pod = rj["template"]["spec"]["template"]["spec"]
        if grace_period is not None:
            pod["terminationGracePeriodSeconds"] = grace_period
        if service_account:
            pod["serviceAccountName"], pod["automountServiceAccountToken"] = service_account, True
        vols, mounts = dataconn.volumes(pvcs or [], config_maps)
        if vols:
            pod["volumes"] = (pod.get("volumes") or []) + vols
        for c in pod["containers"]:
            if c.get("name") != "node":
                continue
            if image:
                c["image"] = image
            set_resources(c.setdefault("resources", {}), res)
            for e in env or []:
                have = c.setdefault("env", [])
                for i, h in enumerate(have):
                    if h["name"] == e["name"]:
                        have[i] = copy.deepcopy(e)
                        break
                else:
                    have.append(copy.deepcopy(e))
            if mounts:
                c["volumeMounts"] = (c.get("volumeMounts") or []) + mounts
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "TrainingRuntime", "metadata": meta, "spec": spec}


def set_resources(r: dict[str, Any], res: dict[str, str]) -> None:
    """Each resource as both request and limit; a zero count removes it."""
    for k, v in res.items():
        if _quantity(v) == 0:
            for side in ("requests", "limits"):
                (r.get(side) or {}).pop(k, None)
            continue
        r.setdefault("requests", {})[k] = v
        r.setdefault("limits", {})[k] = v


def node_selector_patch(sel: dict[str, str]) -> dict[str, Any]:
    """The runtime patch that sends the Launcher and the Workers to nodes with labels ``sel``."""
    return pod_patch(sel, [], [])


def pod_patch(sel: dict[str, str], tolerations: list[dict[str, Any]], pull_secrets: list[str]) -> dict[str, Any]:
    """The builder's runtime patch of the Launcher's and the Workers' pods: node labels,
    tolerations and image pull Secrets (Go: ``jobspec.PodPatch``)."""
    def pod() -> dict[str, Any]:
        out: dict[str, Any] = {}
        if tolerations:
            out["tolerations"] = [_toleration(t) for t in tolerations]
        if pull_secrets:
            out["imagePullSecrets"] = [{"name": n} for n in pull_secrets]
        if sel:
            out["nodeSelector"] = dict(sel)
        return out
    return {"manager": PATCH_MANAGER, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
        {"name": rj, "template": {"spec": {"template": {"spec": pod()}}}} for rj in ("launcher", "node")]}}}}


def _toleration(t: dict[str, Any]) -> dict[str, Any]:
    return {k: t[k] for k in ("key", "operator", "value", "effect", "tolerationSeconds") if t.get(k) not in (None, "")}


# What a job sets besides its shape and its data (Go: pkg/jobspec/scheduling.go).
MAX_DESCRIPTION = 500
MAX_RETRIES = 10
_TIMEOUT = re.compile(r"^(?:([0-9]{1,6})h)?(?:([0-9]{1,6})m)?(?:([0-9]{1,9})s)?$")
_LAUNCHER_PROGRAMS = ("mpirun", "mpiexec", "mpijob-mpiexec", "mpiexec.hydra", "mpirun.openmpi", "mpiexec.openmpi", "orterun", "prterun", "horovodrun")
_EFFECTS = ("", "NoSchedule", "PreferNoSchedule", "NoExecute")


def parse_timeout(s: str) -> int:
    """Seconds of a timeout such as ``90m``, ``2h`` or ``1h30m``; ValueError says what is wrong."""
    m = _TIMEOUT.match(s) if isinstance(s, str) else None
    if not s or m is None:
        raise ValueError("is not a duration: use e.g. 90m, 2h or 1h30m (whole hours h, minutes m and seconds s; a bare number has no unit)")
    secs = sum(int(g) * u for g, u in zip(m.groups(), (3600, 60, 1), strict=True) if g)
    if secs < 1:
        raise ValueError("must be more than 0: use e.g. 90m, 2h or 1h30m, or leave it out for no limit")
    return secs


#: The longest grace period a job may give its ranks to stop (Go's jobspec.MaxGracePeriod): a pod
#: that takes longer holds its node, and the quota of the job that preempted it, that long.
MAX_GRACE_PERIOD = 3600


def parse_grace_period(s: str) -> int | None:
    """Seconds of ``Input.grace_period`` (None: the runtime's). Mirror of Go's parseGracePeriod."""
    if not s:
        return None
    try:
        secs = parse_timeout(s)
    except ValueError:
        if isinstance(s, str) and _TIMEOUT.match(s):
            raise _err("grace_period", s, "must be 1s or more: the ranks get SIGTERM and this long to save and exit") from None
        raise _err("grace_period", s, "is not a duration: use e.g. 90s, 5m or 1h (whole hours h, minutes m and seconds s), "
                                      "or leave it out for the runtime's") from None
    if secs > MAX_GRACE_PERIOD:
        raise _err("grace_period", s, f"is more than {format_timeout(MAX_GRACE_PERIOD)}: a pod that takes longer to stop holds its node "
                                      "that long; save checkpoints more often instead")
    return secs


def _worker_pod(spec: dict[str, Any]) -> dict[str, Any]:
    """The Workers' pod spec in a runtime spec ({} when it has none; Go's jobspec podOf)."""
    for rj in ((spec.get("template") or {}).get("spec") or {}).get("replicatedJobs") or []:
        if rj.get("name") == "node":
            return (((rj.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
    return {}


def grace_period_of(spec: dict[str, Any]) -> int | None:
    """The Workers' terminationGracePeriodSeconds in a runtime spec (Go's jobspec.GracePeriodOf)."""
    return _worker_pod(spec).get("terminationGracePeriodSeconds")


def _service_account_of(spec: dict[str, Any]) -> str:
    """The ServiceAccount the Workers of a runtime spec run as (Go's jobspec.ServiceAccountOf)."""
    return _worker_pod(spec).get("serviceAccountName") or ""


def format_timeout(secs: int) -> str:
    """Seconds as parse_timeout reads them, largest units first (5400 -> 1h30m)."""
    out = ""
    for n, unit in ((3600, "h"), (60, "m"), (1, "s")):
        if secs >= n:
            out += f"{secs // n}{unit}"
            secs %= n
    return out


def format_toleration(t: dict[str, Any]) -> str:
    """KEY[=VALUE][:EFFECT], as ``kubectl taint`` writes a taint (Go: runtimes.FormatToleration)."""
    s = t.get("key") or ""
    if t.get("operator") == "Equal":
        s += "=" + (t.get("value") or "")
    if t.get("effect"):
        s += ":" + t["effect"]
    return s


def parse_toleration(s: str) -> dict[str, Any]:
    """Read KEY[=VALUE][:EFFECT]: no value tolerates any value, no effect every effect."""
    kv, _, effect = s.strip().partition(":")
    key, has_value, value = kv.partition("=")
    t: dict[str, Any] = {"key": key.strip(), "operator": "Equal" if has_value else "Exists"}
    if has_value:
        t["value"] = value.strip()
    if effect.strip():
        t["effect"] = effect.strip()
    return t


def _toleration_problem(t: dict[str, Any]) -> str:
    key, op, value, effect = t.get("key") or "", t.get("operator") or "", t.get("value") or "", t.get("effect") or ""
    if key and not _QUALIFIED.match(key):
        return "the key is not a taint key: write KEY[=VALUE][:EFFECT], as in dedicated=gpu:NoSchedule"
    if op == "Exists":
        if value:
            return "a toleration of any value (Exists) takes no value: write KEY:EFFECT, or KEY=VALUE:EFFECT for one value"
    elif op in ("Equal", ""):
        if not key:
            return "has no taint key: write KEY[=VALUE][:EFFECT], as in dedicated=gpu:NoSchedule"
        if len(value) > 63 or not _LABEL_VALUE.match(value):
            return "the value is not a taint value: use at most 63 letters, digits, '-', '_' or '.'"
    else:
        return f'the operator "{op}" is neither Equal nor Exists'
    if effect not in _EFFECTS:
        return f'the effect "{effect}" is none of NoSchedule, PreferNoSchedule or NoExecute'
    if t.get("tolerationSeconds") is not None:
        return "tolerationSeconds is not offered: a Worker evicted mid-run fails the job"
    return ""


# A Go duration (time.ParseDuration): numbers with units, as 10m, 1h30m, 90s or 1.5h.
_GO_DURATION = re.compile(r"^(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:ns|us|µs|ms|s|m|h))+$")
_GO_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}


def valid_grace(s: str) -> bool:
    """Whether s is a value of policy.mpijob.dev/end-stuck-after: a positive Go duration, or off (0).
    Mirror of Go's runtimes.ParseEndStuckAfter."""
    s = s.strip() if isinstance(s, str) else ""
    if s in ("off", "0"):
        return True
    if not _GO_DURATION.match(s):
        return False
    total = sum(float(n) * _GO_UNITS[u] for n, u in re.findall(r"([0-9.]+)(ns|us|µs|ms|s|m|h)", s))
    return total > 0


def _validate_scheduling(inp: Input) -> int:
    """Check the timeout, retries, priority, tolerations, image pull Secrets and description;
    return the timeout in seconds (0: none). Mirror of Go's validateScheduling."""
    deadline = 0
    if inp.timeout:
        try:
            deadline = parse_timeout(inp.timeout)
        except ValueError as e:
            raise _err("timeout", inp.timeout, str(e)) from None
    if isinstance(inp.retries, bool) or not isinstance(inp.retries, int) or not 0 <= inp.retries <= MAX_RETRIES:
        raise _err("retries", inp.retries, f"use 0 to {MAX_RETRIES}: how many times the whole job starts again after a failure")
    if inp.priority:
        if len(inp.priority) > 253 or not _DNS_SUBDOMAIN.match(inp.priority):
            raise _err("priority", inp.priority, "is not a WorkloadPriorityClass name: use lower-case letters, digits, '-' and '.' (kubectl get workloadpriorityclasses)")
        if not inp.queue:
            raise _err("priority", inp.priority, "Kueue orders the jobs of a queue by priority, and this job has no queue: give it a queue as well")
    for t in inp.tolerations:
        problem = _toleration_problem(t)
        if problem:
            raise _err("tolerations", format_toleration(t), problem)
    seen: set[str] = set()
    for s in inp.image_pull_secrets:
        if not isinstance(s, str) or len(s) > 253 or not _DNS_SUBDOMAIN.match(s):
            raise _err("image_pull_secrets", s, "is not a Secret name: use lower-case letters, digits, '-' and '.' "
                                                "(kubectl get secrets --field-selector type=kubernetes.io/dockerconfigjson)")
        if s in seen:
            raise _err("image_pull_secrets", s, "is named twice: name each Secret once")
        seen.add(s)
    if len(inp.description) > MAX_DESCRIPTION:
        raise _err("description", inp.description[:40] + "…", f"is {len(inp.description)} characters: use at most {MAX_DESCRIPTION}")
    if inp.end_stuck_after and not valid_grace(inp.end_stuck_after):
        raise _err("end_stuck_after", inp.end_stuck_after, "is not a grace period: use a duration such as 10m, 30m or 2h, or off (never end the job)")
    return deadline


def launcher_command(spec: dict[str, Any]) -> list[str]:
    """The command of a runtime's Launcher ("node" container); [] when it has none."""
    launcher, _ = _node_containers(spec)
    return list((launcher or {}).get("command") or [])


def _with_launcher_flags(inp: Input, base: dict[str, Any]) -> list[str]:
    """The Launcher's command with ``launcher_flags`` after its first word (Go: withLauncherFlags)."""
    if not inp.launcher_flags:
        return list(inp.command)
    flags = " ".join(inp.launcher_flags)
    if "" in inp.launcher_flags:
        raise _err("launcher_flags", flags, "has an empty flag")
    if not inp.launcher_flags[0].startswith("-"):
        raise _err("launcher_flags", flags, "must start with a flag such as --bind-to (the program and its arguments go in command)")
    cmd = list(inp.command) or launcher_command(base["spec"])
    if not cmd or cmd[0].rsplit("/", 1)[-1] not in _LAUNCHER_PROGRAMS:
        first = cmd[0] if cmd else ""
        raise _err("launcher_flags", flags, f'go to mpirun or mpiexec, but the command starts with "{first}": start it with mpirun, or write the flags into the command')
    return [cmd[0], *inp.launcher_flags, *cmd[1:]]


# What Trainer's TrainJob webhook says when it does not know the job's runtime, and what
# Kueue's says (a job with a queue); right after the runtime is created this is only their
# caches lagging (Go: jobspec.RuntimeNotSeen; vectors both test:
# pkg/jobspec/testdata/runtime-not-seen.json).
RUNTIME_NOT_SEEN_TEXT = "must be created before the TrainJob is created"
_RUNTIME_NOT_SEEN_KUEUE = re.compile(r"runtime '[^']+' not found")


def runtime_not_seen(error: str) -> bool:
    """Whether a create was refused because Trainer or Kueue has not seen the runtime yet."""
    return RUNTIME_NOT_SEEN_TEXT in error or _RUNTIME_NOT_SEEN_KUEUE.search(error) is not None


# The API server failing to reach an admission webhook at all (a replica restarting while its
# address is still listed, or none ready for a moment): nothing was judged, so another try a moment
# later reaches one that answers (Go: jobspec.TryAgain).
_WEBHOOK_UNREACHABLE = re.compile(
    r'failed calling webhook "[^"]+": failed to call webhook: .*(connect: connection refused|no endpoints available for service)')


def try_again(error: str, after_runtime: bool) -> bool:
    """Whether a create refused with ``error`` is worth another try: a webhook that could not be reached,
    or, right after the job's runtime was created, Trainer or Kueue not having seen it yet."""
    return _WEBHOOK_UNREACHABLE.search(error) is not None or (after_runtime and runtime_not_seen(error))


def _env_var(e: dict[str, Any]) -> dict[str, Any]:
    """A variable as the builder writes it: its value, or the Secret key it is read from."""
    if e.get("valueFrom"):
        return {"name": e["name"], "valueFrom": copy.deepcopy(e["valueFrom"])}
    return {"name": e["name"], "value": e.get("value", "")}


_CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")


def _check_env_source(e: dict[str, Any]) -> None:
    """A variable has a value, or is read from a key of a Secret (env_from_secret): a
    secret's value then never sits in the TrainJob, where every viewer reads it.
    Mirror of Go's checkEnvSource."""
    src = e.get("valueFrom")
    if not src:
        return
    name = e["name"]
    ref = src.get("secretKeyRef")
    if not ref or set(src) - {"secretKeyRef"}:
        raise _err("env", name, f"takes a value or a Secret's key only (valueFrom.secretKeyRef), e.g. --env-from-secret {name}=my-secret:key")
    if e.get("value"):
        raise _err("env", name, "has both a value and a Secret's key: give one")
    secret, key = ref.get("name") or "", ref.get("key") or ""
    if len(secret) > 253 or not _DNS_SUBDOMAIN.match(secret):
        raise _err("env_from_secret", f"{name}={secret}:{key}",
                   "names no valid Secret: use the Secret's name, lower-case letters, digits and '-', e.g. s3-credentials")
    if len(key) > 253 or not _CONFIG_KEY.match(key):
        raise _err("env_from_secret", f"{name}={secret}:{key}",
                   "names no valid key of the Secret: use letters, digits, '-', '_' or '.', e.g. secret-key")


def owner_reference(train_job: dict[str, Any]) -> dict[str, Any]:
    """The owner reference that makes a per-job runtime go with its TrainJob."""
    # No blockOwnerDeletion: Trainer keeps a finalizer on a runtime in use,
    # so a foreground delete of the job would wait for ever.
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "TrainJob", "name": train_job["metadata"]["name"],
            "uid": train_job["metadata"]["uid"]}


def _node_containers(spec: dict[str, Any]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    launcher = worker = None
    for rj in ((spec.get("template") or {}).get("spec") or {}).get("replicatedJobs") or []:
        for c in rj["template"]["spec"]["template"]["spec"].get("containers") or []:
            if c.get("name") == "node":
                if rj["name"] == "launcher":
                    launcher = c
                elif rj["name"] == "node":
                    worker = c
    return launcher, worker


def _changed(base: dict[str, Any], got: dict[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for side in ("requests", "limits"):
        for k, v in (got.get(side) or {}).items():
            if _quantity(str(v)) != _quantity(str((base.get(side) or {}).get(k, "0"))) or k not in (base.get(side) or {}):
                out[k] = str(v)
    for side in ("requests", "limits"):
        for k in base.get(side) or {}:
            if k not in (got.get("requests") or {}) and k not in (got.get("limits") or {}):
                out[k] = "0"
    return out


LEGACY_PATCH_MANAGERS = ("mpijob.dev/kubectl-mpijob", "mpijob.dev/python-sdk")


def _validate_registration(inp: Input) -> None:
    """What registering the model on success needs of the job itself (mirror of Go's
    ``validateRegistration``): a data connection to find the model on."""
    if not inp.register_model and inp.register_artifact:
        raise _err("register_artifact", inp.register_artifact,
                   "names the model file of a registration: give register_model NAME[:VERSION] too, or leave it out")
    if not inp.register_model:
        return
    if not isinstance(inp.register_model, str) or inp.register_model.strip() != inp.register_model or inp.register_model == ":":
        raise _err("register_model", str(inp.register_model), "give the model as NAME[:VERSION], without spaces")
    if not inp.data_connections:
        raise _err("register_model", inp.register_model,
                   "registering the model when the job succeeds reads it from the job's data connection: add a data connection "
                   "(--data-connection), or register a PVC job's model after it succeeds with kubectl mpijob register")
    if "/" in inp.register_artifact:
        raise _err("register_artifact", inp.register_artifact, "name a file among the job's artifacts, without a folder, e.g. model.onnx")


def input_of(tj: dict[str, Any], rt: dict[str, Any] | None, base: dict[str, Any]) -> tuple[Input, list[dict[str, Any]]]:
    """Read back the Input of an existing job (mirror of Go's ``jobspec.InputOf``);
    runtime patches the builder does not write are returned to be kept."""
    meta, spec = tj.get("metadata") or {}, tj.get("spec") or {}
    tr = spec.get("trainer") or {}
    nodes = tr.get("numNodes") or ((base["spec"].get("mlPolicy") or {}).get("numNodes") or 1)
    inp = Input(name=meta.get("name", ""), namespace=meta.get("namespace", ""), runtime=base["metadata"]["name"],
                workers=max(nodes - 1, 1) if _launcher_as_node(base) else nodes,
                slots_per_worker=tr.get("numProcPerNode") or 0, command=list(tr.get("command") or []),
                env=[_env_var(e) for e in tr.get("env") or []],
                image=tr.get("image") or "", queue=(meta.get("labels") or {}).get(QUEUE_LABEL, ""),
                priority=(meta.get("labels") or {}).get(PRIORITY_LABEL, ""),
                description=(meta.get("annotations") or {}).get(DESCRIPTION, ""),
                end_stuck_after=(meta.get("annotations") or {}).get(END_STUCK_AFTER, ""),
                register_model=(meta.get("annotations") or {}).get(REGISTER_MODEL, ""),
                register_artifact=(meta.get("annotations") or {}).get(REGISTER_ARTIFACT, ""),
                timeout=format_timeout(spec.get("activeDeadlineSeconds") or 0))
    if tr.get("resourcesPerNode"):
        r = tr["resourcesPerNode"]
        inp.resources_per_worker = {k: str(v) for side in ("requests", "limits") for k, v in (r.get(side) or {}).items()}
    kept = []
    for p in spec.get("runtimePatches") or []:
        if p.get("manager") in (PATCH_MANAGER, *LEGACY_PATCH_MANAGERS):
            for rj in ((((p.get("trainingRuntimeSpec") or {}).get("template") or {}).get("spec") or {}).get("replicatedJobs") or []):
                pod = (((rj.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
                if pod.get("nodeSelector") or pod.get("tolerations") or pod.get("imagePullSecrets"):
                    inp.node_selector = dict(pod.get("nodeSelector") or {})
                    inp.tolerations = [dict(t) for t in pod.get("tolerations") or []]
                    inp.image_pull_secrets = [r["name"] for r in pod.get("imagePullSecrets") or []]
                    break
            spec_patch = [rj for rj in ((((p.get("trainingRuntimeSpec") or {}).get("template") or {}).get("spec") or {}).get("replicatedJobs") or [])
                          if ((((rj.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec") or {}).get("volumes")]
            if spec_patch:
                kept.append(p)  # volumes ride along as they were
        elif p.get("manager") != "kueue.x-k8s.io/manager":
            kept.append(p)
    if rt is None:
        return inp, kept
    restarts = ((rt["spec"].get("template") or {}).get("spec") or {}).get("failurePolicy") or {}
    base_restarts = ((base["spec"].get("template") or {}).get("spec") or {}).get("failurePolicy") or {}
    if restarts.get("maxRestarts", 0) != base_restarts.get("maxRestarts", 0):
        inp.retries = restarts.get("maxRestarts", 0)
    inp.service_account = _service_account_of(rt["spec"])
    grace = grace_period_of(rt["spec"])
    if grace is not None and grace != grace_period_of(base["spec"]):
        inp.grace_period = format_timeout(grace)
    bl, bw = _node_containers(base["spec"])
    gl, gw = _node_containers(rt["spec"])
    if gw:
        inp.data_connections = dataconn.connections_of(gw.get("env") or [])
        inp.pvcs = _pvcs_of(rt["spec"], gw)
        inp.config_maps = _config_maps_of(rt["spec"], gw)
        inp.resume_from = _resume_input_of(dataconn.resume_of(gw.get("env") or []), inp.data_connections, inp.pvcs)
    if gw and bw:
        if gw.get("image") != bw.get("image"):
            inp.worker_image = gw.get("image", "")
        inp.resources_per_worker = _changed(bw.get("resources") or {}, gw.get("resources") or {})
    if gl and bl:
        if gl.get("image") != bl.get("image"):
            inp.launcher_image = gl.get("image", "")
        if not _launcher_as_node(base):
            inp.launcher_resources = _changed(bl.get("resources") or {}, gl.get("resources") or {})
    if inp.launcher_image and inp.launcher_image == inp.worker_image:
        inp.image, inp.launcher_image, inp.worker_image = inp.launcher_image, "", ""
    return inp, kept


def _config_maps_of(spec: dict[str, Any], worker: dict[str, Any]) -> list[dataconn.ConfigMap]:
    out = []
    for rj in spec["template"]["spec"]["replicatedJobs"]:
        if rj["name"] != "node":
            continue
        for v in rj["template"]["spec"]["template"]["spec"].get("volumes") or []:
            cm = v.get("configMap")
            if not cm or v["name"] != dataconn.config_map_volume_name(cm.get("name", "")):
                continue
            for m in worker.get("volumeMounts") or []:
                if m["name"] == v["name"]:
                    c = dataconn.ConfigMap(name=cm["name"])
                    if m["mountPath"] != dataconn.default_config_map_path(c.name):
                        c.mount_path = m["mountPath"]
                    out.append(c)
    return out


def _pvcs_of(spec: dict[str, Any], worker: dict[str, Any]) -> list[dataconn.PVC]:
    out = []
    for rj in spec["template"]["spec"]["replicatedJobs"]:
        if rj["name"] != "node":
            continue
        for v in rj["template"]["spec"]["template"]["spec"].get("volumes") or []:
            pvc = v.get("persistentVolumeClaim")
            if not pvc or v["name"] != dataconn.volume_name(pvc["claimName"]):
                continue
            for m in worker.get("volumeMounts") or []:
                if m["name"] == v["name"]:
                    p = dataconn.PVC(claim=pvc["claimName"])
                    if m["mountPath"] != dataconn.default_mount_path(p.claim):
                        p.mount_path = m["mountPath"]
                    out.append(p)
    return out
