"""Legacy ``kubeflow.org/v2beta1`` MPIJob → TrainJob, as ``kubectl mpijob convert`` does.

The same rules as the CLI's converter (``pkg/legacy``); the tests check both
give the same manifests for the same legacy jobs.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from importlib import resources
from typing import Any

import yaml

from . import jobspec
from .errors import InvalidJobError


def shipped_runtimes() -> dict[str, dict[str, Any]]:
    """The runtimes mpijob ships (config/runtimes, copied byte for byte into the package):
    what the conversion derives the job's own runtime from, in the CLI as in the SDK."""
    out: dict[str, dict[str, Any]] = {}
    for f in sorted(resources.files("mpijob").joinpath("runtimes").iterdir(), key=lambda f: f.name):
        if f.name.endswith(".yaml"):
            rt = yaml.safe_load(f.read_text())
            out[rt["metadata"]["name"]] = rt
    return out


# note(field, action, detail) records what the conversion did with a field.
Note = Callable[[str, str, str], None]

GANG_TIMEOUT = "policy.mpijob.dev/gang-scheduling-timeout"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PATCH_MANAGER = "mpijob.dev/convert"
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def _err(field: str, problem: str, fix: str = "") -> InvalidJobError:
    return InvalidJobError(f"{field}: {problem}" + (f"; {fix}" if fix else ""), field=field)


def _node_container(pod: dict[str, Any]) -> dict[str, Any]:
    containers: list[dict[str, Any]] = pod.get("containers") or []
    for c in containers:
        if c.get("name") == "node":
            return c
    return containers[0]


def _has_gpu(c: dict[str, Any]) -> bool:
    res = c.get("resources") or {}
    return any(k.endswith("/gpu") for part in ("limits", "requests") for k in (res.get(part) or {}))


def convert(manifest: str | dict[str, Any], runtimes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Convert one legacy MPIJob. ``runtimes`` maps runtime names to ClusterTrainingRuntime
    dicts (the shipped ones: mpi-openmpi, mpi-openmpi-gpu, mpi-intel, mpi-mpich)."""
    if isinstance(manifest, str):
        if not manifest.strip():
            raise _err("input", "is empty", "give a kubeflow.org/v2beta1 MPIJob manifest")
        try:
            job = yaml.safe_load(manifest)
        except yaml.YAMLError as e:
            raise _err("input", f"is not YAML or JSON: {str(e).splitlines()[0]}") from None
    else:
        job = copy.deepcopy(manifest)
    if not isinstance(job, dict):
        raise _err("input", "is not a manifest (a mapping)")
    if job.get("kind") != "MPIJob":
        raise _err("kind", f"is {job.get('kind')!r}", "convert takes kind MPIJob (kubeflow.org/v2beta1)")
    if job.get("apiVersion") != "kubeflow.org/v2beta1":
        raise _err("apiVersion", f"is {job.get('apiVersion')!r}",
                   "only kubeflow.org/v2beta1 converts; move a v1 MPIJob to v2beta1 first (mpi-operator docs)")
    meta = job.get("metadata") or {}
    spec = job.get("spec") or {}
    if not isinstance(spec, dict):
        raise _err("spec", "is not a mapping")
    for path in ("spec.slotsPerWorker", "spec.mpiReplicaSpecs.Launcher.replicas", "spec.mpiReplicaSpecs.Worker.replicas",
                 "spec.runPolicy.activeDeadlineSeconds", "spec.runPolicy.backoffLimit", "spec.runPolicy.ttlSecondsAfterFinished"):
        _int_field({"spec": spec}, path)
    name = meta.get("name") or ""
    if not name:
        raise _err("metadata.name", "is empty", "name the job")
    if not _DNS1123_LABEL.match(name) or len(name) > 63:
        raise _err("metadata.name", f"{name!r} is not a valid name")
    if len(name) > jobspec.MAX_NAME:
        raise _err("metadata.name", f"{name!r} has {len(name)} characters, more than {jobspec.MAX_NAME}",
                   "rename it in the manifest (JobSet appends \"-launcher-0-0-xxxxx\" to pod names, which must stay within 63)")
    notes: list[dict[str, str]] = []

    def note(field: str, action: str, detail: str) -> None:
        notes.append({"field": field, "action": action, "detail": detail})

    replicas = spec.get("mpiReplicaSpecs") or {}
    for k in replicas:
        if k not in ("Launcher", "Worker"):
            raise _err(f"spec.mpiReplicaSpecs.{k}", "is not a replica type", "use Launcher and Worker")
    launcher, worker = replicas.get("Launcher"), replicas.get("Worker")
    if not launcher:
        raise _err("spec.mpiReplicaSpecs.Launcher", "is missing", "an MPIJob needs a Launcher with a container that runs mpirun")
    if launcher.get("replicas") not in (None, 1):
        raise _err("spec.mpiReplicaSpecs.Launcher.replicas", f"is {launcher.get('replicas')}", "an MPI job has exactly 1 Launcher")
    lpod_src = ((launcher.get("template") or {}).get("spec") or {})
    if not lpod_src.get("containers"):
        raise _err("spec.mpiReplicaSpecs.Launcher.template.spec.containers", "is empty", "give the Launcher the container that runs mpirun")
    workers = 0
    wpod_src: dict[str, Any] = {}
    if worker:
        workers = worker.get("replicas", 1) if worker.get("replicas") is not None else 1
        if not isinstance(workers, int) or workers < 0:
            raise _err("spec.mpiReplicaSpecs.Worker.replicas", f"is {workers}", "use 1 or more Workers")
        wpod_src = ((worker.get("template") or {}).get("spec") or {})
        if not wpod_src.get("containers"):
            raise _err("spec.mpiReplicaSpecs.Worker.template.spec.containers", "is empty", "give the Workers their container")
    as_worker = bool(spec.get("runLauncherAsWorker"))
    if workers == 0 and not as_worker:
        raise _err("spec.mpiReplicaSpecs.Worker", "has no replicas and the Launcher is not a worker", "add Workers or set runLauncherAsWorker")
    lc = lpod_src["containers"][0]
    wc = wpod_src["containers"][0] if worker else {}
    gpus = _has_gpu(lc) or _has_gpu(wc)

    impl = spec.get("mpiImplementation") or "OpenMPI"
    if impl == "OpenMPI":
        rt_name = "mpi-openmpi-gpu" if gpus or as_worker else "mpi-openmpi"
    elif impl == "Intel":
        rt_name = "mpi-intel"
    elif impl == "MPICH":
        rt_name = "mpi-mpich"
    else:
        raise _err("spec.mpiImplementation", f"{impl!r} is unknown", "use OpenMPI, Intel or MPICH")
    note("spec.mpiImplementation", "mapped", f"{impl} → runtime {rt_name}")
    if rt_name not in runtimes:
        raise _err("runtime", f"{rt_name} is not installed", "install mpijob's runtimes (config/runtimes)")
    base = runtimes[rt_name]
    mpi = base["spec"]["mlPolicy"]["mpi"]
    separate = not mpi.get("runLauncherAsNode", False)
    rjs = base["spec"]["template"]["spec"]["replicatedJobs"]
    # Each role's image in the runtime: the GPU runtime's Workers run the
    # CUDA image and its Launcher the CPU one.
    base_images = {rj["name"]: _node_container(rj["template"]["spec"]["template"]["spec"]).get("image", "") for rj in rjs}

    tj: dict[str, Any] = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
        "metadata": {k: v for k, v in (("name", name), ("namespace", meta.get("namespace")),
                                        ("labels", dict(meta.get("labels") or {}) or None),
                                        ("annotations", dict(meta.get("annotations") or {}) or None)) if v},
        "spec": {"runtimeRef": {"apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime", "name": rt_name}, "trainer": {}},
    }
    tr = tj["spec"]["trainer"]
    note("metadata", "mapped", "name, namespace, labels and annotations kept")
    if separate and as_worker:
        tr["numNodes"] = workers + 1
        note("spec.mpiReplicaSpecs.Worker.replicas", "changed",
             f"{workers} + the Launcher (runLauncherAsWorker) → spec.trainer.numNodes {workers + 1}: "
             f"on {rt_name} the Launcher hosts no ranks, so one more Worker keeps the number of rank hosts")
    elif separate:
        tr["numNodes"] = workers
        note("spec.mpiReplicaSpecs.Worker.replicas", "mapped", f"{workers} → spec.trainer.numNodes {workers}")
    elif as_worker:
        tr["numNodes"] = workers + 1
        note("spec.mpiReplicaSpecs.Worker.replicas", "mapped", f"{workers} + the Launcher (runLauncherAsWorker) → spec.trainer.numNodes {workers + 1}")
        note("spec.runLauncherAsWorker", "mapped", f"runtime {rt_name} runs the Launcher as a rank host")
    else:
        tr["numNodes"] = workers + 1
        note("spec.mpiReplicaSpecs.Worker.replicas", "changed",
             f"{workers} → spec.trainer.numNodes {workers + 1}: on {rt_name} the Launcher hosts ranks too (one more rank host than before)")
    slots = spec.get("slotsPerWorker") or 1
    tr["numProcPerNode"] = slots
    note("spec.slotsPerWorker", "mapped", f"{slots} → spec.trainer.numProcPerNode")
    if lc.get("command"):
        tr["command"] = lc["command"]
        note("Launcher command", "mapped", "→ spec.trainer.command")
    if lc.get("args"):
        tr["args"] = lc["args"]
        note("Launcher args", "mapped", "→ spec.trainer.args")
    lenv = _env("Launcher env", lc.get("env") or [], note)
    if lenv:
        tr["env"] = lenv
        note("Launcher env", "mapped", "→ spec.trainer.env")

    # Images and resources go into the job's own runtime (as in Go): Trainer
    # would give spec.trainer.image and resourcesPerNode to the Launcher alone.
    per_job = f"the job's runtime {name}"
    launcher_image = worker_image = ""
    worker_res: dict[str, Any] | None = None
    launcher_res: dict[str, Any] | None = None
    if lc.get("image") and lc["image"] != base_images.get("launcher"):
        launcher_image = lc["image"]
        note("Launcher image", "changed", f"→ the Launcher's image in {per_job}")
    if _has_resources(lc.get("resources")):
        launcher_res = copy.deepcopy(lc["resources"])
        if as_worker and separate:
            gone = _drop_gpus(launcher_res)
            if gone:
                note("Launcher resources", "changed",
                     f"{', '.join(gone)} dropped: the Launcher hosts no ranks here, the extra Worker has them (as many GPUs in all as before)")
        if _has_resources(launcher_res):
            note("Launcher resources", "changed", f"→ the Launcher's resources in {per_job}")
        else:
            launcher_res = None
    patches: list[dict[str, Any]] = []
    if worker:
        if wc.get("image") and wc["image"] != base_images.get("node"):
            worker_image = wc["image"]
            note("Worker image", "changed", f"→ the Workers' image in {per_job} (Trainer sets spec.trainer.image on the Launcher only)")
        if _has_resources(wc.get("resources")):
            worker_res = copy.deepcopy(wc["resources"])
            note("Worker resources", "changed", f"→ the Workers' resources in {per_job} (Trainer sets resourcesPerNode on the Launcher only)")
        # Trainer refuses environment in a patch of the node containers: the
        # Workers' variables join the Launcher's, which mpirun -x passes to the ranks.
        for var in _env("Worker env", wc.get("env") or [], note):
            if not any(x.get("name") == var.get("name") for x in tr.get("env") or []):
                tr.setdefault("env", []).append(var)
                note(f"Worker env {var['name']}", "changed",
                     f"→ spec.trainer.env (the Launcher's: Trainer sets no Worker environment; pass it to the ranks with mpirun -x {var['name']})")
            else:
                note(f"Worker env {var['name']}", "dropped",
                     f"the Launcher sets {var['name']} too; its value is kept (pass it to the ranks with mpirun -x {var['name']})")
        p = _pod_patch("node", "Worker", wpod_src, note)
        if p:
            patches.append(p)
        for f in ("command", "args"):
            if wc.get(f):
                note(f"Worker {f}", "dropped", "Workers run sshd in mpijob runtimes; the program starts from the Launcher's mpirun")
        if len(wpod_src["containers"]) > 1:
            note("Worker sidecar containers", "dropped",
                 f"{len(wpod_src['containers']) - 1} extra container(s): a job's runtime carries only images and resources; ask an administrator for a runtime with them")
        _restart(worker.get("restartPolicy"), "Worker", note)
    p = _pod_patch("launcher", "Launcher", lpod_src, note)
    if p:
        patches.append(p)
    if patches:
        tj["spec"]["runtimePatches"] = [{"manager": PATCH_MANAGER, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": patches}}}}]
    if len(lpod_src["containers"]) > 1:
        note("Launcher sidecar containers", "dropped",
             f"{len(lpod_src['containers']) - 1} extra container(s): a job's runtime carries only images and resources; ask an administrator for a runtime with them")
    _restart(launcher.get("restartPolicy"), "Launcher", note)
    ssh = spec.get("sshAuthMountPath")
    if ssh and ssh != mpi.get("sshAuthMountPath"):
        detail = f"{ssh}: runtime {rt_name} mounts the SSH keys at {mpi.get('sshAuthMountPath', '')}"
        if ssh.startswith("/root"):
            detail += ("; keys under /root mean the image runs as root, which Pod Security \"restricted\" refuses: "
                       "move to a non-root user (mpijob images use /home/mpiuser/.ssh)")
        note("spec.sshAuthMountPath", "dropped", detail)
    lcp = spec.get("launcherCreationPolicy")
    if lcp == "AtStartup":
        note("spec.launcherCreationPolicy", "changed", "AtStartup → the Launcher starts when every Worker is Ready (all mpijob runtimes)")
    elif lcp == "WaitForWorkersReady":
        note("spec.launcherCreationPolicy", "mapped", "WaitForWorkersReady: what every mpijob runtime does")

    rp = spec.get("runPolicy") or {}
    if rp.get("cleanPodPolicy") is not None:
        note("spec.runPolicy.cleanPodPolicy", "dropped", f"{rp['cleanPodPolicy']}: pods stay until the TrainJob is deleted; `kubectl mpijob delete` removes them")
    if rp.get("ttlSecondsAfterFinished") is not None:
        note("spec.runPolicy.ttlSecondsAfterFinished", "dropped",
             f"{rp['ttlSecondsAfterFinished']}: a finished TrainJob stays until deleted (`kubectl mpijob delete`); its Workers stop when the Launcher finishes")
    if rp.get("activeDeadlineSeconds") is not None:
        tj["spec"]["activeDeadlineSeconds"] = rp["activeDeadlineSeconds"]
        note("spec.runPolicy.activeDeadlineSeconds", "mapped", f"{rp['activeDeadlineSeconds']} → spec.activeDeadlineSeconds")
    if rp.get("backoffLimit") is not None:
        note("spec.runPolicy.backoffLimit", "dropped",
             f"{rp['backoffLimit']}: a failed Launcher or Worker fails the job (a lost rank cannot rejoin); rerun it with `kubectl mpijob clone`")
    if rp.get("suspend") is not None:
        tj["spec"]["suspend"] = rp["suspend"]
        note("spec.runPolicy.suspend", "mapped", "→ spec.suspend")
    if rp.get("managedBy") is not None:
        note("spec.runPolicy.managedBy", "dropped", f"\"{rp['managedBy']}\": TrainJobs are managed by Trainer (or MultiKueue through spec.managedBy)")
    sp = rp.get("schedulingPolicy") or {}
    gang_timeout = ""
    if sp.get("queue"):
        tj["metadata"].setdefault("labels", {})[QUEUE_LABEL] = sp["queue"]
        note("spec.runPolicy.schedulingPolicy.queue", "changed",
             f"\"{sp['queue']}\" → Kueue LocalQueue \"{sp['queue']}\" (label {QUEUE_LABEL}); create it if it does not exist")
    if sp.get("priorityClass"):
        note("spec.runPolicy.schedulingPolicy.priorityClass", "dropped",
             f"\"{sp['priorityClass']}\": pod priority set by a namespace could preempt other namespaces' jobs; "
             "priorities come from Kueue (label kueue.x-k8s.io/priority-class with a WorkloadPriorityClass an administrator made)")
    if sp.get("scheduleTimeoutSeconds") is not None:
        gang_timeout = f"{sp['scheduleTimeoutSeconds']}s"
        note("spec.runPolicy.schedulingPolicy.scheduleTimeoutSeconds", "changed",
             f"{sp['scheduleTimeoutSeconds']} → annotation {GANG_TIMEOUT} of {per_job} (the job is reported stuck, not killed)")
    if sp.get("minAvailable") is not None:
        note("spec.runPolicy.schedulingPolicy.minAvailable", "dropped",
             f"{sp['minAvailable']}: a TrainJob's Launcher starts only when every Worker is placed; "
             f"Kueue admits the whole job at once, and the runtime policy {GANG_TIMEOUT} reports a job that waits too long")
    if sp.get("minResources") is not None:
        note("spec.runPolicy.schedulingPolicy.minResources", "dropped", "Kueue computes the job's resources from its pods")
    status = job.get("status") or {}
    if status.get("conditions") or status.get("startTime"):
        note("status", "dropped", "the legacy job's status does not carry over; the TrainJob starts fresh")

    runtime: dict[str, Any] | None = None
    if launcher_image or worker_image or worker_res or launcher_res or gang_timeout:
        runtime = jobspec.derive(base, name, meta.get("namespace") or "", launcher_image, worker_image, {}, {})
        for rj in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
            res = worker_res if rj["name"] == "node" or not separate else launcher_res
            if rj["name"] in ("node", "launcher") and res is not None:
                _node_container(rj["template"]["spec"]["template"]["spec"])["resources"] = copy.deepcopy(res)
        ann = runtime["metadata"]["annotations"]
        ann[jobspec.DESCRIPTION] = (f"runtime of MPI job {name}, converted from a legacy MPIJob: "
                                    f"{rt_name} with the legacy images and resources (deleted with the job)")
        if gang_timeout:
            ann[GANG_TIMEOUT] = gang_timeout
        tj["spec"]["runtimeRef"] = {"apiGroup": "trainer.kubeflow.org", "kind": "TrainingRuntime", "name": name}
        tj["metadata"].setdefault("labels", {})[jobspec.BASE_RUNTIME_LABEL] = rt_name
        note("runtime", "changed",
             f"TrainingRuntime {name} in the job's namespace: {rt_name} with the legacy images and resources, "
             "owned by the job once it exists (a namespace editor applies it, no administrator needed)")
    _quantities(tj)
    if runtime is not None:
        _quantities(runtime)
    order = {"mapped": 0, "changed": 1, "dropped": 2}
    notes.sort(key=lambda n: order[n["action"]])
    return {"trainJob": tj, "runtime": runtime, "notes": notes}


def _quantities(o: Any) -> None:
    """Write resource quantities as Kubernetes does: strings ("4", "1Gi")."""
    if isinstance(o, dict):
        for k, v in o.items():
            if k in ("requests", "limits") and isinstance(v, dict):
                for r, q in v.items():
                    if isinstance(q, (int, float)) and not isinstance(q, bool):
                        v[r] = str(q)
            else:
                _quantities(v)
    elif isinstance(o, list):
        for v in o:
            _quantities(v)


def _int_field(spec: dict[str, Any], path: str) -> None:
    cur: Any = spec
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return
        cur = cur[part]
    if cur is not None and (isinstance(cur, bool) or not isinstance(cur, int)):
        raise _err("spec", f"does not match the MPIJob schema: {path} is {cur!r}, not an integer")


def _restart(policy: str | None, role: str, note: Note) -> None:
    if policy and policy != "Never":
        note(f"spec.mpiReplicaSpecs.{role}.restartPolicy", "changed", f"{policy} → Never: a failed {role} fails the job (a lost rank cannot rejoin)")


def _has_resources(r: dict[str, Any] | None) -> bool:
    return bool(r and (r.get("requests") or r.get("limits")))


def _drop_gpus(r: dict[str, Any]) -> list[str]:
    gone: dict[str, str] = {}
    for side in ("requests", "limits"):
        rl = r.get(side) or {}
        for k in [k for k in rl if k.endswith("/gpu")]:
            gone[k] = str(rl.pop(k))
        if side in r and not rl:
            del r[side]
    return sorted(f"{k} {q}" for k, q in gone.items())


# The MPI variables Trainer v2.3 sets and refuses in a TrainJob.
RESERVED_ENV = frozenset({"OMPI_MCA_orte_default_hostfile", "OMPI_MCA_plm_rsh_args",
                          "OMPI_MCA_orte_keep_fqdn_hostnames", "OMPI_MCA_orte_set_default_slots"})


def _env(what: str, env: list[dict[str, Any]], note: Note) -> list[dict[str, Any]]:
    out = []
    for e in env:
        if e.get("name") in RESERVED_ENV:
            note(f"{what} {e['name']}", "dropped", "Trainer sets it for every MPI job (and refuses it from users)")
            continue
        out.append(e)
    return out


def _pod_patch(rj: str, role: str, src: dict[str, Any], note: Note) -> dict[str, Any] | None:
    """What a legacy pod template has beyond image, command, env and resources, as a runtime patch of ``rj``."""
    to = f"→ spec.runtimePatches (manager {PATCH_MANAGER})"
    ps: dict[str, Any] = {}
    if src.get("nodeSelector"):
        ps["nodeSelector"] = src["nodeSelector"]
        note(f"{role} nodeSelector", "changed", to)
    if src.get("tolerations"):
        ps["tolerations"] = src["tolerations"]
        note(f"{role} tolerations", "changed", to)
    if src.get("affinity"):
        ps["affinity"] = src["affinity"]
        note(f"{role} affinity", "changed", f"{to} (replaces the runtime's one-Worker-per-node rule)")
    node: dict[str, Any] = {"name": "node"}
    if src.get("volumes"):
        ps["volumes"] = src["volumes"]
        mounts = (src.get("containers") or [{}])[0].get("volumeMounts") or []
        if mounts:
            node["volumeMounts"] = mounts
        note(f"{role} volumes", "changed", f"{len(src['volumes'])} volume(s) and their mounts {to}")
    if len(node) > 1:
        ps["containers"] = [node]
    if src.get("serviceAccountName"):
        ps["serviceAccountName"] = src["serviceAccountName"]
        note(f"{role} serviceAccountName", "changed", f"\"{src['serviceAccountName']}\" {to}")
    if src.get("imagePullSecrets"):
        ps["imagePullSecrets"] = src["imagePullSecrets"]
        note(f"{role} imagePullSecrets", "changed", to)
    if src.get("securityContext"):
        note(f"{role} securityContext", "dropped", "mpijob runtimes run Pod Security \"restricted\" (non-root, no privilege escalation)")
    if src.get("containers") and src["containers"][0].get("securityContext") is not None:
        note(f"{role} container securityContext", "dropped", "mpijob runtimes run Pod Security \"restricted\"")
    if src.get("priorityClassName"):
        note(f"{role} priorityClassName", "dropped",
             f"\"{src['priorityClassName']}\": pod priority set by a namespace could preempt other namespaces' jobs; use Kueue priorities")
    if not ps:
        return None
    return {"name": rj, "template": {"spec": {"template": {"spec": ps}}}}
