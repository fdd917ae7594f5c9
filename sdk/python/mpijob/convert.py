"""Legacy ``kubeflow.org/v2beta1`` MPIJob → TrainJob, as ``kubectl mpijob convert`` does.

The same rules as the CLI's converter (``pkg/legacy``); the tests check both
give the same manifests for the same legacy jobs.
"""

from __future__ import annotations

import copy
import re
from typing import Any, Optional, Union

import yaml

from .errors import InvalidJobError

GANG_TIMEOUT = "policy.mpijob.dev/gang-scheduling-timeout"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _err(field: str, problem: str, fix: str = "") -> InvalidJobError:
    return InvalidJobError(f"{field}: {problem}" + (f"; {fix}" if fix else ""), field=field)


def _node_container(pod: dict[str, Any]) -> dict[str, Any]:
    for c in pod.get("containers") or []:
        if c.get("name") == "node":
            return c
    return pod["containers"][0]


def _has_gpu(c: dict[str, Any]) -> bool:
    res = c.get("resources") or {}
    return any(k.endswith("/gpu") for part in ("limits", "requests") for k in (res.get(part) or {}))


def convert(manifest: Union[str, dict[str, Any]], runtimes: dict[str, dict[str, Any]]) -> dict[str, Any]:
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
    if not _DNS1123_SUBDOMAIN.match(name) or len(name) > 253:
        raise _err("metadata.name", f"{name!r} is not a valid name")
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
    if as_worker and rt_name != "mpi-openmpi-gpu":
        raise _err("spec.runLauncherAsWorker", f"is not supported with {impl}", "mpijob's Launcher hosts ranks only with OpenMPI (mpi-openmpi-gpu)")
    if rt_name not in runtimes:
        raise _err("runtime", f"{rt_name} is not installed", "install mpijob's runtimes (config/runtimes)")
    base = runtimes[rt_name]
    mpi = base["spec"]["mlPolicy"]["mpi"]
    separate = not mpi.get("runLauncherAsNode", False)
    rjs = base["spec"]["template"]["spec"]["replicatedJobs"]
    base_image = _node_container(rjs[0]["template"]["spec"]["template"]["spec"]).get("image", "")

    tj: dict[str, Any] = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
        "metadata": {k: v for k, v in (("name", name), ("namespace", meta.get("namespace")),
                                        ("labels", dict(meta.get("labels") or {}) or None),
                                        ("annotations", dict(meta.get("annotations") or {}) or None)) if v},
        "spec": {"runtimeRef": {"apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime", "name": rt_name}, "trainer": {}},
    }
    tr = tj["spec"]["trainer"]
    note("metadata", "mapped", "name, namespace, labels and annotations kept")
    if separate:
        tr["numNodes"] = workers
        note("spec.mpiReplicaSpecs.Worker.replicas", "mapped", f"{workers} → spec.trainer.numNodes {workers}")
    else:
        tr["numNodes"] = workers + 1
        if as_worker:
            note("spec.mpiReplicaSpecs.Worker.replicas", "mapped", f"{workers} + the Launcher (runLauncherAsWorker) → spec.trainer.numNodes {workers + 1}")
        else:
            note("spec.mpiReplicaSpecs.Worker.replicas", "changed",
                 f"{workers} → spec.trainer.numNodes {workers + 1}: on {rt_name} the Launcher hosts ranks too (one more rank host than before)")
    if as_worker and separate:
        tr["numNodes"] = workers + 1
        note("spec.runLauncherAsWorker", "changed",
             f"mpijob's Launcher hosts no ranks: {workers + 1} Workers instead of {workers} + the Launcher, the same number of rank hosts")
    elif as_worker:
        note("spec.runLauncherAsWorker", "mapped", f"runtime {rt_name} runs the Launcher as a rank host")
    slots = spec.get("slotsPerWorker") or 1
    tr["numProcPerNode"] = slots
    note("spec.slotsPerWorker", "mapped", f"{slots} → spec.trainer.numProcPerNode")
    for key, label in (("command", "command"), ("args", "args"), ("env", "env")):
        if lc.get(key):
            tr[key] = lc[key]
            note(f"Launcher {label}", "mapped", f"→ spec.trainer.{key}")
    # The Launcher's image and resources go into the job's runtime (as in Go).
    launcher_image = lc["image"] if lc.get("image") and lc["image"] != base_image else ""
    lres = lc.get("resources") or {}

    rt = copy.deepcopy(base)
    custom = False
    rrjs = rt["spec"]["template"]["spec"]["replicatedJobs"]
    wpod = rrjs[0]["template"]["spec"]["template"]["spec"]
    lpod = rrjs[1]["template"]["spec"]["template"]["spec"]
    if worker:
        if wc.get("image") and wc["image"] != base_image:
            _node_container(wpod)["image"] = wc["image"]
            custom = True
            note("Worker image", "changed", f"→ the Workers' image in runtime {name} (Trainer sets spec.trainer.image on the Launcher only)")
        wres = wc.get("resources") or {}
        if separate and (wres.get("requests") or wres.get("limits")):
            _node_container(wpod)["resources"] = copy.deepcopy(wres)
            custom = True
            note("Worker resources", "changed", f"→ runtime {name} (TrainJobs set Worker resources only where the Launcher hosts ranks)")
        if wc.get("env"):
            _node_container(wpod)["env"] = (_node_container(wpod).get("env") or []) + wc["env"]
            custom = True
            note("Worker env", "changed", f"→ runtime {name}")
        if _merge_pod(wpod, wpod_src, "Worker", name, note):
            custom = True
        for f in ("command", "args"):
            if wc.get(f):
                note(f"Worker {f}", "dropped", "Workers run sshd in mpijob runtimes; the program starts from the Launcher's mpirun")
        if len(wpod_src["containers"]) > 1:
            note("Worker sidecar containers", "dropped", f"{len(wpod_src['containers']) - 1} extra container(s); add them to runtime {name} by hand if needed")
        _restart(worker.get("restartPolicy"), "Worker", note)
    if launcher_image:
        _node_container(lpod)["image"] = launcher_image
        custom = True
        note("Launcher image", "changed", f"→ the Launcher's image in runtime {name}")
    if lres.get("requests") or lres.get("limits"):
        _node_container(lpod)["resources"] = copy.deepcopy(lres)
        custom = True
        note("Launcher resources", "changed", f"→ the Launcher's resources in runtime {name}")
    if _merge_pod(lpod, lpod_src, "Launcher", name, note):
        custom = True
    if len(lpod_src["containers"]) > 1:
        note("Launcher sidecar containers", "dropped", f"{len(lpod_src['containers']) - 1} extra container(s); add them to runtime {name} by hand if needed")
    _restart(launcher.get("restartPolicy"), "Launcher", note)
    ssh = spec.get("sshAuthMountPath")
    if ssh and ssh != mpi.get("sshAuthMountPath"):
        rt["spec"]["mlPolicy"]["mpi"]["sshAuthMountPath"] = ssh
        custom = True
        detail = f"{ssh} → runtime {name}"
        if ssh.startswith("/root"):
            detail += ("; keys under /root mean the image runs as root, which Pod Security \"restricted\" refuses: "
                       "move to a non-root user (mpijob images use /home/mpiuser/.ssh)")
        note("spec.sshAuthMountPath", "changed", detail)
    lcp = spec.get("launcherCreationPolicy")
    if lcp == "AtStartup":
        note("spec.launcherCreationPolicy", "changed", "AtStartup → the Launcher starts when every Worker is Ready (all mpijob runtimes)")
    elif lcp == "WaitForWorkersReady":
        note("spec.launcherCreationPolicy", "mapped", "WaitForWorkersReady: what every mpijob runtime does")

    rp = spec.get("runPolicy") or {}
    if rp.get("cleanPodPolicy") is not None:
        note("spec.runPolicy.cleanPodPolicy", "dropped", f"{rp['cleanPodPolicy']}: pods stay until the TrainJob is deleted; `kubectl mpijob delete` removes them")
    if rp.get("ttlSecondsAfterFinished") is not None:
        rt["spec"]["template"]["spec"]["ttlSecondsAfterFinished"] = rp["ttlSecondsAfterFinished"]
        custom = True
        note("spec.runPolicy.ttlSecondsAfterFinished", "changed", f"{rp['ttlSecondsAfterFinished']} → runtime {name}: the JobSet (pods) is deleted after it, the TrainJob stays")
    if rp.get("activeDeadlineSeconds") is not None:
        tj["spec"]["activeDeadlineSeconds"] = rp["activeDeadlineSeconds"]
        note("spec.runPolicy.activeDeadlineSeconds", "mapped", f"{rp['activeDeadlineSeconds']} → spec.activeDeadlineSeconds")
    if rp.get("backoffLimit") is not None:
        rrjs[1]["template"]["spec"]["backoffLimit"] = rp["backoffLimit"]
        custom = True
        note("spec.runPolicy.backoffLimit", "changed", f"{rp['backoffLimit']} → the Launcher's backoffLimit in runtime {name}; a failed Worker still fails the job (backoffLimit 0)")
    if rp.get("suspend") is not None:
        tj["spec"]["suspend"] = rp["suspend"]
        note("spec.runPolicy.suspend", "mapped", "→ spec.suspend")
    if rp.get("managedBy") is not None:
        note("spec.runPolicy.managedBy", "dropped", f"\"{rp['managedBy']}\": TrainJobs are managed by Trainer (or MultiKueue through spec.managedBy)")
    sp = rp.get("schedulingPolicy") or {}
    if sp.get("queue"):
        tj["metadata"].setdefault("labels", {})[QUEUE_LABEL] = sp["queue"]
        note("spec.runPolicy.schedulingPolicy.queue", "changed",
             f"\"{sp['queue']}\" → Kueue LocalQueue \"{sp['queue']}\" (label {QUEUE_LABEL}); create it if it does not exist")
    if sp.get("priorityClass"):
        wpod["priorityClassName"] = lpod["priorityClassName"] = sp["priorityClass"]
        custom = True
        note("spec.runPolicy.schedulingPolicy.priorityClass", "changed", f"\"{sp['priorityClass']}\" → the pods' priorityClassName in runtime {name}")
    if sp.get("scheduleTimeoutSeconds") is not None:
        rt["metadata"].setdefault("annotations", {})[GANG_TIMEOUT] = f"{sp['scheduleTimeoutSeconds']}s"
        custom = True
        note("spec.runPolicy.schedulingPolicy.scheduleTimeoutSeconds", "changed",
             f"{sp['scheduleTimeoutSeconds']} → runtime policy {GANG_TIMEOUT} (the job is reported stuck, not killed)")
    if sp.get("minAvailable") is not None:
        note("spec.runPolicy.schedulingPolicy.minAvailable", "dropped",
             f"{sp['minAvailable']}: a TrainJob's Launcher starts only when every Worker is placed; "
             f"Kueue admits the whole job at once, and the runtime policy {GANG_TIMEOUT} reports a job that waits too long")
    if sp.get("minResources") is not None:
        note("spec.runPolicy.schedulingPolicy.minResources", "dropped", "Kueue computes the job's resources from its pods")
    status = job.get("status") or {}
    if status.get("conditions") or status.get("startTime"):
        note("status", "dropped", "the legacy job's status does not carry over; the TrainJob starts fresh")

    runtime: Optional[dict[str, Any]] = None
    if custom:
        md = rt.setdefault("metadata", {})
        for k in ("resourceVersion", "uid", "creationTimestamp", "managedFields", "generation"):
            md.pop(k, None)
        md["name"] = name
        ann = md.setdefault("annotations", {})
        ann["mpijob.dev/description"] = f"Converted from MPIJob {name}, based on {rt_name}"
        ann["mpijob.dev/converted-from"] = rt_name
        rt.pop("status", None)
        rt["apiVersion"], rt["kind"] = "trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime"
        runtime = rt
        tj["spec"]["runtimeRef"]["name"] = name
        note("runtime", "changed", f"the legacy pod templates need runtime {name} (based on {rt_name}); an administrator installs it")
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


def _restart(policy: Optional[str], role: str, note) -> None:
    if policy and policy != "Never":
        note(f"spec.mpiReplicaSpecs.{role}.restartPolicy", "changed", f"{policy} → Never: a failed {role} fails the job (a lost rank cannot rejoin)")


def _merge_pod(dst: dict[str, Any], src: dict[str, Any], role: str, name: str, note) -> bool:
    changed = False
    if src.get("nodeSelector"):
        dst["nodeSelector"] = src["nodeSelector"]
        note(f"{role} nodeSelector", "changed", f"→ runtime {name}")
        changed = True
    if src.get("tolerations"):
        dst["tolerations"] = src["tolerations"]
        note(f"{role} tolerations", "changed", f"→ runtime {name}")
        changed = True
    if src.get("affinity"):
        dst["affinity"] = src["affinity"]
        note(f"{role} affinity", "changed", f"→ runtime {name} (replaces the runtime's one-Worker-per-node rule)")
        changed = True
    if src.get("volumes"):
        dst["volumes"] = (dst.get("volumes") or []) + src["volumes"]
        if src.get("containers"):
            n = _node_container(dst)
            n["volumeMounts"] = (n.get("volumeMounts") or []) + (src["containers"][0].get("volumeMounts") or [])
        note(f"{role} volumes", "changed", f"{len(src['volumes'])} volume(s) and their mounts → runtime {name}")
        changed = True
    if src.get("securityContext"):
        note(f"{role} securityContext", "dropped", "mpijob runtimes run Pod Security \"restricted\" (non-root, no privilege escalation)")
    if src.get("containers") and src["containers"][0].get("securityContext") is not None:
        note(f"{role} container securityContext", "dropped", "mpijob runtimes run Pod Security \"restricted\"")
    if src.get("serviceAccountName"):
        dst["serviceAccountName"] = src["serviceAccountName"]
        note(f"{role} serviceAccountName", "changed", f"\"{src['serviceAccountName']}\" → runtime {name}")
        changed = True
    return changed
