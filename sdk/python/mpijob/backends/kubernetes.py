"""The Kubernetes backend: what ``MPIJobClient`` does, against the cluster's API server.

The facade (``mpijob.client``) documents each call; this module holds the logic. It reads and
writes through ``KubernetesAPI`` (``kube_api``), the thin layer over the official client.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import logging
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

import urllib3

from .. import builders as _b
from .. import convert as _convert
from .. import dataconn as _dataconn
from .. import jobspec as _jobspec
from .. import logs as _logs
from .. import progress as _progress
from .. import stacks as _stacks
from .. import validation as _v
from ..constants import PATCH_MANAGER
from ..errors import (
    APIUnreachableError,
    InvalidJobError,
    JobFailedError,
    JobNotFoundError,
    MPIJobError,
    PermissionDeniedError,
    WaitTimeoutError,
)
from ..frameworks import MPI as MPI_FRAMEWORK
from ..frameworks import framework_of_trainjob, runtime_framework
from ..placement import placement_lines
from ..redact import Redactor
from ..registry import Registration, parse_ref
from ..suggest import closest
from ..types import (
    CLONE_KEEPS,
    CREATOR_ANNOTATION,
    NEVER_STARTS,
    PHASES,
    QUEUE_LABEL,
    STATUS_ANNOTATION,
    JobEvent,
    JobSpec,
    JobStatus,
    LifecycleEvent,
    MPIJob,
    Runtime,
    clean_text,
    event_kind,
    forged_event,
    is_job_object,
    manager_state,
    stale_note,
)
from .base import Backend
from .kube_api import KubernetesAPI

_log = logging.getLogger("mpijob")

#: At most this many jobs without mpijob-manager's status are read one by one when listing
#: metadata (Go's ``api.MaxWholeReads``, pkg/api/testdata/row-from-status.json); with more,
#: whole jobs are listed.
MAX_GETS = 20


class KubernetesBackend(Backend):
    """MPI jobs of one namespace, through the cluster's API server."""

    def __init__(self, api: KubernetesAPI):
        self._api = api
        self.namespace = api.namespace
        self.last_log_sources: dict[str, str] = {}

    @classmethod
    def from_kubeconfig(cls, namespace: str | None, context: str | None, config_file: str | None) -> KubernetesBackend:
        return cls(KubernetesAPI.from_kubeconfig(namespace, context, config_file))

    def create_job(self, spec: JobSpec, dry_run: bool = False) -> MPIJob:
        _v.check_command(spec.command)
        for f, v in (("image", spec.image), ("worker_image", spec.worker_image), ("launcher_image", spec.launcher_image)):
            _v.check_image(f, v)
        _v.check_str_map("env", spec.env)
        _v.warn_secret_looking(spec.env)
        _v.check_str_map("node_selector", spec.node_selector)
        vols = _v.volumes(spec.volumes)
        inp = _jobspec.Input(
            name=spec.name, namespace=self.namespace, runtime=spec.runtime, workers=spec.workers, slots_per_worker=spec.slots_per_worker or 0,
            image=spec.image or "", worker_image=spec.worker_image or "", launcher_image=spec.launcher_image or "",
            command=list(spec.command or []), resources_per_worker=_v.resources("resources_per_worker", spec.resources_per_worker),
            launcher_resources=_v.resources("launcher_resources", spec.launcher_resources),
            env=_v.env_list(spec.env, spec.env_from_secret), node_selector=dict(spec.node_selector or {}), queue=spec.queue or "",
            data_connections=_v.names("data_connection", spec.data_connection),
            pvcs=[_dataconn.PVC.parse(p) for p in _v.names("pvc", spec.pvc)],
            config_maps=[_dataconn.ConfigMap.parse(c) for c in _v.names("config_map", spec.config_map)])
        _scheduling(inp, {k: getattr(spec, k) for k in SCHEDULING_ARGS})
        if spec.slots_per_worker is not None:
            _v.check_int("slots_per_worker", spec.slots_per_worker, 1)
        _b.build(inp, _b.offline_runtime(spec.runtime))  # what needs no cluster is checked first
        job = _b.build(inp, self._runtime(spec.runtime))
        self._check_storage(inp)
        if vols:
            job.train_job["spec"].setdefault("runtimePatches", []).append(_b.patch(None, vols))
        return self._create(job, dry_run)

    def _check_storage(self, inp: _jobspec.Input) -> None:
        for name in inp.data_connections:
            secret = self._api.get_secret(name)
            problem = _dataconn.check(name, secret)
            if problem is None:
                continue
            hint = ""
            if secret is None:
                names = self._api.list_connections()
                close = closest(name, names)
                hint = f" (did you mean {close}?)" if close else (f" (this namespace has: {', '.join(names)})" if names else "")
            raise InvalidJobError(f"data_connection {name!r}: " + (f"key {problem.key} " if problem.key else "") + problem.problem + hint,
                                  field="data_connection")
        for p in inp.pvcs:
            if not self._api.pvc_exists(p.claim):
                raise InvalidJobError(f"pvc {p.claim!r}: no such PersistentVolumeClaim in namespace {self.namespace}: create it first "
                                      "(kubectl get pvc lists them)", field="pvc")
        r = inp.resume_from
        if r and "://" not in r:
            try:
                self._api.get_trainjob(r)
            except JobNotFoundError as e:
                hint = f" (did you mean {e.suggestion}?)" if e.suggestion else ""
                raise InvalidJobError(f"resume_from {r!r}: no MPI job {r} in namespace {self.namespace}{hint}: name a job of this "
                                      f"namespace (list_jobs), or, for a job that is gone, its checkpoint folder as a URI, "
                                      f"e.g. s3://BUCKET/{r}/checkpoints/", field="resume_from") from None
        for c in inp.config_maps:
            if not self._api.config_map_exists(c.name):
                raise InvalidJobError(f"config_map {c.name!r}: no such ConfigMap in namespace {self.namespace}: create it first "
                                      f"(kubectl create configmap {c.name} --from-file=...)", field="config_map")

    def get_progress(self, name: str) -> list[_progress.Report]:
        self._get(name)
        launchers, _ = self._pods(name)
        if not launchers:
            return []
        log = self._api.pod_log(launchers[0].metadata.name, **_logs.pod_log_options())
        return _progress.parse_log(log or "")

    def get_stacks(self, name: str) -> _stacks.Stacks:
        from concurrent.futures import ThreadPoolExecutor

        job = self.get_job(name)
        if job.status.finished:
            raise MPIJobError(f"job {name} is {job.status.phase}: stacks shows where a running job's ranks are "
                              f"(its output: client.get_logs({name!r}))")
        launchers, workers = self._pods(name)
        pods = _stacks.pods_of(launchers, workers)
        if not pods:
            raise MPIJobError(f"job {name} has no running pod now (phase {job.status.phase}): "
                              f"client.get_job({name!r}).status says why")

        def collect(pod: _stacks.Pod) -> str:
            return "".join(self._api.exec_pod(pod.name, "node", ["sh", "-c", _stacks.SCRIPT]))

        ranks: list[_stacks.Rank] = []
        failed: list[str] = []
        errors: list[MPIJobError] = []
        with ThreadPoolExecutor(max_workers=min(16, len(pods))) as pool:
            for pod, fut in [(p, pool.submit(collect, p)) for p in pods]:
                try:
                    ranks += _stacks.ranks_of(pod, _stacks.parse(fut.result()))
                except MPIJobError as e:
                    errors.append(e)
                    failed.append(f"{pod.where()} (pod {pod.name}): {e}")
        if errors and len(errors) == len(pods):
            if isinstance(errors[0], PermissionDeniedError):
                raise PermissionDeniedError(f"taking stacks runs a command in the job's pods, which needs the right to "
                                            f"create pods/exec in namespace {self._api.namespace}: {errors[0]}") from None
            raise errors[0]
        ranks.sort(key=lambda r: r.rank)
        groups = _stacks.group(ranks)
        return _stacks.Stacks(ranks=ranks, groups=groups, contrast=_stacks.contrast(groups), failed=failed)

    def get_artifacts(self, name: str, download_dir: str | None = None, files: Sequence[str] | None = None,
                      overwrite: bool = False) -> list[dict[str, Any]]:
        obj = self._get(name)
        return self._artifacts_of(name, obj, self._storage_of(obj), download_dir, files, overwrite)

    def _storage_of(self, obj: dict[str, Any]) -> tuple[dict[str, Any], list[str], list[_dataconn.PVC]]:
        """The job's runtime spec, data connections and PVCs (read once)."""
        rt_ref = (obj.get("spec") or {}).get("runtimeRef") or {}
        if rt_ref.get("kind") != "TrainingRuntime":
            return {}, [], []
        spec = self._api.job_runtime(rt_ref["name"])["spec"]
        _, worker = _jobspec._node_containers(spec)
        return spec, _dataconn.connections_of((worker or {}).get("env") or []), _jobspec._pvcs_of(spec, worker or {})

    def _artifacts_of(self, name: str, obj: dict[str, Any], storage: tuple[dict[str, Any], list[str], list[_dataconn.PVC]],
                      download_dir: str | None = None, files: Sequence[str] | None = None,
                      overwrite: bool = False) -> list[dict[str, Any]]:
        from .. import artifacts as _artifacts

        spec, conns, pvcs = storage
        if not conns and pvcs:
            with _artifacts.PVCReader(self._api, obj, _artifacts.reader_template(spec), pvcs[0],
                                      say=_log.info) as reader:
                return _artifacts.list_and_download_pvc(reader, download_dir, list(files or []), overwrite)
        if not conns:
            raise InvalidJobError(f"job {name} has no data connection or PVC, so it has no artifacts to list: create it "
                                  f"with data_connection= or pvc= and have it write to ${_dataconn.OUTPUT_ENV}", field="name")
        secret = self._api.get_secret(conns[0])
        problem = _dataconn.check(conns[0], secret)
        if problem is not None:
            raise InvalidJobError(str(problem), field="data_connection")
        assert secret is not None
        return _artifacts.list_and_download(conns[0], secret["data"], name, download_dir, list(files or []), overwrite)

    def register_model(self, job: str, name: str, version: str | None = None, artifact: str | None = None,
                       registry: str | None = None, registry_url: str | None = None, registry_ca: str | None = None,
                       new_model: bool = False) -> Registration:
        import os

        from .. import registry as _reg

        ref = _reg.parse_ref("name", f"{name}:{version}" if version is not None else name, job)
        address = registry_url or ""
        if not address:
            svc = registry or os.environ.get("MPIJOB_MODEL_REGISTRY") or _reg.DEFAULT_REGISTRY
            ns, _, svc_name = svc.partition("/")
            if not ns or not svc_name or "/" in svc_name:
                raise InvalidJobError(f'registry "{svc}": name the registry\'s Service as NAMESPACE/SERVICE, e.g. {_reg.DEFAULT_REGISTRY}',
                                      field="registry")
            ann = self._api.service_annotations(ns, svc_name)
            if ann is None:
                raise InvalidJobError(f"registry {svc}: there is no model registry Service {svc_name} in namespace {ns}: name the "
                                      "registry with registry=NAMESPACE/SERVICE (OpenShift AI: rhoai-model-registries/NAME) or registry_url=",
                                      field="registry")
            address = _reg.address_of(ann)
            if not address:
                raise InvalidJobError(f"Service {svc} does not say where its registry's REST API is (annotation {_reg.URL_ANNOTATION} "
                                      f"or {_reg.ODH_REST_ANNOTATION}): give registry_url=", field="registry")
        token = self._api.bearer_token()
        if not token:
            raise InvalidJobError("your kubeconfig has no token to give the model registry (it takes a bearer token, as OpenShift AI's does): "
                                  "log in with one (oc login), or use a context that has one", field="registry")
        client = _reg.RegistryClient(address, token, registry_ca)
        obj = self._get(job)
        j = MPIJob.from_trainjob(obj)
        complete = any(c.get("type") == "Complete" and c.get("status") == "True" for c in (obj.get("status") or {}).get("conditions") or [])
        if j.status.phase != "Succeeded" and not complete:
            raise InvalidJobError(f"MPI job {job} is {j.status.phase}: a model is registered from a job that succeeded "
                                  f"(client.wait_for_job({job!r}), then register it)", field="job")
        storage = self._storage_of(obj)
        items = self._artifacts_of(job, obj, storage)
        picked = _reg.pick_model(job, [i["name"] for i in items], artifact)
        item = next(i for i in items if i["name"] == picked)
        uri = item.get("uri", "")
        if uri.startswith("s3://"):
            secret = self._api.get_secret(storage[1][0]) or {"data": {}}
            data = secret["data"]
            bucket, _, key = uri[len("s3://"):].partition("/")
            uri = _reg.s3_uri(bucket, key, (data.get(_dataconn.ENDPOINT) or "").strip(), (data.get(_dataconn.REGION) or "").strip() or "us-east-1")
        fmt = _reg.format_of(picked) or ("", "")
        metrics = {k: v for k, v in ((j.progress.metrics if j.progress else {}) or {}).items() if k in ("accuracy", "loss")}
        meta = obj.get("metadata") or {}
        prov = {"namespace": meta.get("namespace", ""), "job": job, "uid": meta.get("uid", ""), "runtime": j.runtime,
                "workers": str(((obj.get("spec") or {}).get("trainer") or {}).get("numNodes") or ""),
                "image": self._image_of(obj, storage[0]), "creator": j.status.creator}
        m = _reg.Model(ref=ref, uri=uri, artifact=picked, format=fmt[0], format_version=fmt[1], author=self._api.whoami(),
                       description=f"Trained by MPI job {prov['namespace']}/{job} (runtime {j.runtime})", metrics=metrics,
                       provenance={k: v for k, v in prov.items() if v})
        if not new_model and client.find_model(ref.name) is None:
            near = closest(ref.name, client.model_names())
            if near:
                raise InvalidJobError(f"model {ref.name} is not in the registry, but {near} is: did you mean "
                                      f"register_model({job!r}, {near!r}, version={ref.version!r})? To create model {ref.name}, pass new_model=True",
                                      field="name")
        return client.register(m)

    def _image_of(self, obj: dict[str, Any], spec: dict[str, Any]) -> str:
        """The image the job's Workers ran: the job's own, else its runtime's ("" when unknown)."""
        img = ((obj.get("spec") or {}).get("trainer") or {}).get("image")
        if img:
            return str(img)
        _, worker = _jobspec._node_containers(spec) if spec else (None, None)
        return str((worker or {}).get("image") or "")

    def _create(self, job: _jobspec.Job, dry_run: bool) -> MPIJob:
        body, rt = job.train_job, job.runtime
        if rt is not None:
            self._api.create_job_runtime(rt)
        try:
            obj, warnings = self._api.create_trainjob(body, dry_run, retry=rt is not None)
        except MPIJobError:
            if rt is not None:
                self._api.delete_job_runtime(rt["metadata"]["name"])
            raise
        if rt is not None:
            if dry_run:
                self._api.delete_job_runtime(rt["metadata"]["name"])
            else:
                self._api.give_runtime_to(rt["metadata"]["name"], obj)
        made = MPIJob.from_trainjob(obj)
        made.placement = placement_lines(warnings)
        return made

    def get_job(self, name: str) -> MPIJob:
        obj = self._get(name)
        return self._say_stale([MPIJob.from_trainjob(obj, self._hosts_ranks(obj))])[0]

    def _say_stale(self, jobs: list[MPIJob]) -> list[MPIJob]:
        readable, lease = self._api.manager_lease()
        if not readable or not jobs:
            return jobs
        now = datetime.now(timezone.utc)
        running, since = manager_state(lease, now)
        for j in jobs:
            if j.status.from_manager:
                j.status.stale_note = stale_note(running, since, j.status.observed_time, now)
        return jobs

    def list_jobs(self, runtime: str | None = None, phase: str | None = None, full: bool = False,
                  all_frameworks: bool = False) -> list[MPIJob]:
        if phase is not None and phase not in PHASES:
            raise InvalidJobError(f"phase {phase!r}: use one of {', '.join(PHASES)}", field="phase")
        if not isinstance(full, bool):
            raise InvalidJobError(f"full {full!r}: use True (whole TrainJobs in .raw) or False (metadata only, faster)", field="full")
        if not isinstance(all_frameworks, bool):
            raise InvalidJobError(f"all_frameworks {all_frameworks!r}: use True (every TrainJob) or False (MPI jobs only)", field="all_frameworks")
        jobs = None if full else self._jobs_from_metadata()
        if jobs is None:
            items = self._api.list_trainjobs()
            rank_hosts = self._rank_hosts()
            jobs = [MPIJob.from_trainjob(o, rank_hosts.get((o.get("spec") or {}).get("runtimeRef", {}).get("name"), False)) for o in items]
        # MPI jobs only, by the rule kubectl mpijob get and admission use (mpijob.frameworks).
        cluster, namespaced = self._frameworks()
        jobs = [dataclasses.replace(j, framework=framework_of_trainjob(j.raw, cluster, namespaced, runtime=j.runtime)) for j in jobs]
        return self._say_stale(sorted((j for j in jobs if (all_frameworks or j.framework == MPI_FRAMEWORK)
                                       and (runtime is None or j.runtime == runtime) and (phase is None or j.status.phase == phase)),
                                      key=lambda j: j.name))

    def _frameworks(self) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
        """The framework of each ClusterTrainingRuntime, and of the namespace's TrainingRuntimes."""
        try:
            cluster = {(r.get("metadata") or {}).get("name", ""): runtime_framework(r.get("spec"), (r.get("metadata") or {}).get("labels"))
                       for r in self._api.list_cluster_runtimes()}
        except MPIJobError:
            cluster = {}
        list_ns = getattr(self._api, "list_namespaced_runtimes", None)
        own = {(r.get("metadata") or {}).get("name", ""): runtime_framework(r.get("spec"), (r.get("metadata") or {}).get("labels"))
               for r in (list_ns() if list_ns else [])}
        return cluster, {self._api.namespace: own}

    def _jobs_from_metadata(self) -> list[MPIJob] | None:
        """The namespace's jobs from their metadata and mpijob-manager's status, which names each
        job's runtime, Workers and slots (Go's ``listRows`` does the same for ``kubectl mpijob
        get``). A job without such a status (the manager has not seen it yet, or is not installed)
        is read whole, one by one for up to MAX_GETS of them; None with more, or without an API
        client: the caller lists whole jobs."""
        metas = self._api.list_trainjob_metadata()
        if metas is None:
            return None
        jobs: list[MPIJob] = []
        whole: list[str] = []
        for m in metas:
            job = MPIJob.from_metadata(m)
            if job is not None:
                jobs.append(job)
                continue
            whole.append((m.get("metadata") or {}).get("name", ""))
            if len(whole) > MAX_GETS:
                return None
        rank_hosts = self._rank_hosts() if whole else {}
        for name in whole:
            obj = self._api.read_trainjob(name)
            if obj is not None:  # else deleted since the list
                jobs.append(MPIJob.from_trainjob(obj, rank_hosts.get((obj.get("spec") or {}).get("runtimeRef", {}).get("name"), False)))
        return jobs

    def _rank_hosts(self) -> dict[str, bool]:
        """Whether each MPI runtime's Launcher hosts ranks, by runtime name."""
        return {r.name: r.launcher_hosts_ranks for r in self._runtimes_safe()}

    def list_runtimes(self) -> list[Runtime]:
        out = []
        for r in self._api.list_base_runtimes():
            meta = r.get("metadata") or {}
            ann = meta.get("annotations") or {}
            out.append(Runtime(
                name=meta["name"], mpi_implementation=ann.get("mpijob.dev/mpi-implementation", ""),
                description=ann.get("mpijob.dev/description", ""), launcher_hosts_ranks=_b.launcher_hosts_ranks(r),
                worker_image=_b.worker_image(r), raw=r, namespace=meta.get("namespace", "")))
        return out

    def wait_for_job(self, name: str, phases: Iterable[str] = ("Succeeded",), timeout: float = 600,
                     poll_interval: float = 2) -> MPIJob:
        wanted = {phases} if isinstance(phases, str) else set(phases)
        for p in wanted:
            if p not in PHASES:
                raise InvalidJobError(f"phases: {p!r} is not a phase; use {', '.join(PHASES)}", field="phases")
        _v.check_seconds("timeout", timeout)
        _v.check_seconds("poll_interval", poll_interval)
        deadline = time.monotonic() + timeout
        while True:
            obj = self._get(name)
            s = JobStatus.from_trainjob(obj)
            if s.phase in wanted or ("Running" in wanted and s.phase == "Succeeded"):
                return MPIJob.from_trainjob(obj, self._hosts_ranks(obj))
            # A job that can never start never reaches a later phase.
            never = s.reason in NEVER_STARTS and not wanted & {"Pending", "Queued", "GangScheduling"}
            if s.finished or never:
                msg = f"job {name} finished {s.phase}, not {'/'.join(sorted(wanted))}"
                if never:
                    msg = f"job {name} can never reach {'/'.join(sorted(wanted))}"
                if s.reason:
                    msg += f": {s.reason}: {s.message}"
                if s.next_step:
                    msg += f" Next step: {s.next_step}"
                raise JobFailedError(msg, status=s)
            if time.monotonic() >= deadline:
                raise WaitTimeoutError(f"job {name} did not reach {'/'.join(sorted(wanted))} within {timeout:g}s; "
                                       f"it is {s.phase}: {s.message}", status=s)
            time.sleep(poll_interval)

    def watch(self, name: str, timeout: float = 3600, events: bool = True) -> Iterator[LifecycleEvent]:
        job = self.get_job(name)
        yield LifecycleEvent("submitted", job.status.phase, f"job {name} on runtime {job.runtime}", job.status, _logs.now())
        last_phase, last_ready = None, None
        last_training = ""
        seen: set[tuple[str, str, str, str, int]] = set()
        status = job.status
        deadline = time.monotonic() + timeout

        def new_events() -> Iterator[LifecycleEvent]:
            if not events:
                return
            for e in self.get_events(name):
                key = (e.kind, e.object, e.reason, e.message, e.count)
                if key in seen:
                    continue
                seen.add(key)
                yield LifecycleEvent("event", status.phase, f"{e.type} {e.reason} ({e.kind} {e.object}): {e.message}", status, e.time, event=e)

        while time.monotonic() < deadline:
            for kind, obj in self._api.watch_trainjob(name, max(1, min(5, int(deadline - time.monotonic())))):
                if kind == "DELETED":
                    return
                status = JobStatus.from_trainjob(obj)
                # Only what the manager said, and only with its words: no phase guessed
                # before it wrote one, no empty message.
                if status.from_manager and status.message and status.phase != last_phase:
                    last_phase = status.phase
                    yield LifecycleEvent(event_kind(status.phase), status.phase, status.message, status, _logs.now())
                ready = (status.workers_ready, status.workers_total)
                if status.from_manager and not status.finished and status.workers_total and ready != last_ready:
                    if last_ready is not None or status.workers_ready:
                        yield LifecycleEvent("progress", status.phase, f"Workers ready {ready[0]}/{ready[1]}", status, _logs.now())
                    last_ready = ready
                # Training progress the ranks report (mpijob.progress), as the manager publishes it.
                trained = _progress.Progress.of_job(obj)
                if trained is not None and str(trained) and str(trained) != last_training:
                    last_training = str(trained)
                    metrics = ", ".join(f"{k} {v:.4g}" for k, v in sorted(trained.metrics.items()))
                    yield LifecycleEvent("progress", status.phase, f"training {trained}" + (f" ({metrics})" if metrics else ""), status, _logs.now())
                if status.finished:
                    yield from new_events()
                    return
            yield from new_events()

    def get_events(self, name: str) -> list[JobEvent]:
        evs = self._api.list_events()
        # The manager vouches for its own Events in the job's status; an Event that claims to be
        # the manager's and is not vouched for is marked forged (as kubectl mpijob events does).
        digests: list[str] = []
        try:
            raw = (self._api.get_trainjob(name).get("metadata") or {}).get("annotations") or {}
            digests = list(json.loads(raw.get(STATUS_ANNOTATION, "{}")).get("eventDigests") or [])
        except (MPIJobError, ValueError, AttributeError, TypeError):
            digests = []  # no status to vouch: every Event that claims the manager is marked
        out: list[JobEvent] = []
        for ev in evs:
            o = ev.involved_object
            if o is None or not is_job_object(name, o.kind or "", o.name or ""):
                continue
            src = ev.source.component if ev.source else ""
            forged = forged_event(o.uid or "", ev.type or "", ev.reason or "", ev.message or "",
                                  (ev.reporting_component or "", src or "", ev.reporting_instance or ""), digests)
            out.append(JobEvent(type=clean_text(ev.type or ""), reason=clean_text(ev.reason or ""),
                                message=clean_text(ev.message or ""), kind=o.kind or "",
                                object=o.name or "", time=ev.last_timestamp or ev.event_time or ev.first_timestamp
                                or (ev.metadata.creation_timestamp if ev.metadata else None), count=ev.count or 1,
                                forged=forged))
        epoch = datetime.min.replace(tzinfo=timezone.utc)
        out.sort(key=lambda x: x.time or epoch)
        return out

    def get_logs(self, name: str, worker: int | str | None = None, follow: bool = False,
                 since: int | str | timedelta | None = None, until: datetime | None = None,
                 tail: int | None = None, grep: str | None = None, redact: bool = True,
                 rank: int | str | None = None, source: str = "auto") -> str | Iterator[str]:
        rx = None
        if grep is not None:
            try:
                rx = re.compile(grep)
            except re.error as e:
                raise InvalidJobError(f"grep {grep!r} is not a regular expression: {e}", field="grep") from None
        if tail is not None:
            _v.check_int("tail", tail, 0)
        since_s = None
        if since is not None:
            since_s = _v.seconds("since", since)
        if until is not None and not isinstance(until, datetime):
            raise InvalidJobError(f"until={until!r}: use a datetime, e.g. datetime.now(timezone.utc) - timedelta(minutes=5)", field="until")
        if not (worker is None or worker == "all" or (isinstance(worker, int) and worker >= 0)):
            raise InvalidJobError(f"worker {worker!r}: use None (the Launcher), a Worker index, or 'all'", field="worker")
        ranks: set[int] | None = None
        if rank is not None:
            if isinstance(rank, bool) or not isinstance(rank, (int, str)):
                raise InvalidJobError(f"rank={rank!r}: give a rank number, a range like '0-3', or a list like '0,2,5-7'", field="rank")
            if worker is not None:
                raise InvalidJobError(f"rank={rank!r}: the ranks' output is in the Launcher's log, so rank= goes with worker=None",
                                      field="rank")
            try:
                ranks = _logs.parse_selection(str(rank))
            except ValueError as e:
                raise InvalidJobError(f"rank={rank!r}: {e}", field="rank") from None
        if source not in ("auto", "pods", "store"):
            raise InvalidJobError(f"source={source!r}: use 'auto', 'pods' or 'store'", field="source")
        if source == "store" and follow:
            raise InvalidJobError("source='store' reads what is stored and ends: drop follow=True", field="source")
        obj = self._get(name)
        launcher, workers = self._pods(name)
        status = JobStatus.from_trainjob(obj)
        store = source != "pods" and self._api.log_store_available()
        if source == "store" and not store:
            raise JobNotFoundError("source='store': this cluster keeps no log store (the logs.mpijob.dev API is not served); "
                                   "an administrator installs one with config/logstore, or read the pods with source='pods'", name=name)
        forced = source == "store"
        no_store = "" if store else ", and this cluster keeps no log store to read once pods are gone"
        # Each Worker's pod by index; of two with one index (one stops while its replacement
        # starts), the running one: Go's jobpods.Pods.Worker.
        by_index: dict[int, Any] = {}
        for p in workers:
            i = _logs.worker_index(p)
            if i is None:
                continue
            if i not in by_index or (_phase(by_index[i]) != "Running" and _phase(p) == "Running"):
                by_index[i] = p
        spec_workers = int(((obj.get("spec") or {}).get("trainer") or {}).get("numNodes") or 0)
        target = "launcher" if worker is None else "all" if worker == "all" else f"worker-{worker}"
        # Which logs, and where each one is read: the plan the CLI and the dashboard execute too
        # (logs.plan_logs, Go's jobview.PlanLogs).
        # Finished by the manager's status, or by Trainer's own condition, which the status follows
        # a moment later (Go's jobview.LogJobOf): JobSet removes a failed job's pods at once.
        finished = status.finished or any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
                                          for c in ((obj.get("status") or {}).get("conditions") or []))
        # A suspended or preempted job's pods are gone until it starts again: what it printed is
        # the store's too.
        finished = finished or status.phase == "Suspended" or status.reason == "Preempted"
        plan = _logs.plan_logs(target, workers=max(spec_workers, status.workers_total), launcher_live=bool(launcher),
                               live_workers=list(by_index), finished=finished, store=store, store_only=forced)
        if plan.missing == "no-launcher-log":
            raise JobNotFoundError(f"job {name} has no Launcher pod (phase {status.phase}){no_store}; try worker='all'", name=name)
        if plan.missing == "worker-out-of-range":
            raise JobNotFoundError(f"worker {worker}: job {name} has {plan.workers} Workers (0 to {plan.workers - 1})", name=name)
        if plan.missing == "no-worker-log":
            raise JobNotFoundError(f"worker {worker}: job {name} has no pod for Worker {worker} (phase {status.phase}){no_store}",
                                   name=name)
        sources = [_Source(r.label, (launcher[0] if r.role == "launcher" else by_index[r.index]) if r.source == "pod" else None,
                           r.role, None if r.role == "launcher" else r.index)
                   for r in plan.reads]
        if not sources:
            raise JobNotFoundError(f"job {name} has no pods yet", name=name)
        prefix = len(sources) > 1
        redactors = {s.label: Redactor() for s in sources}

        def render(label: str, raw: str) -> str | None:
            ts, _, text = raw.partition(" ")
            t = _logs.parse_ts(ts)
            if t is None:
                text = raw
            if until is not None and t is not None and t > until.astimezone(timezone.utc):
                return None
            if ranks is not None:
                tagged = _logs.split_rank(text)
                if tagged is None or tagged[0] not in ranks:
                    return None
            if redact:
                text = redactors[label].line(text)
            if rx is not None and not rx.search(text):
                return None
            return (f"[{label}] " if prefix else "") + text

        # Read as the CLI and the dashboard read (Go's jobpods.LogOptions): the node container by
        # name, the kubelet's timestamps, one byte limit. stream_pod_log follows by itself.
        kwargs = _logs.pod_log_options(tail_lines=tail, since_seconds=since_s)
        live = [(s.label, s.pod) for s in sources if s.pod is not None]
        self.last_log_sources = {s.label: ("pod" if s.pod is not None else "log store") for s in sources}
        if follow and live:
            if len(live) < len(sources):
                _log.info("following the live pods only; %s: pod gone, its lines are in the log store",
                          ", ".join(s.label for s in sources if s.pod is None))
            return self._follow(live, kwargs, render)
        streams = []
        for src in sources:
            if src.pod is None:
                lines = self._api.stored_log(name, src.role, src.index, since_seconds=since_s).splitlines()
                if tail is not None:
                    lines = lines[-tail:] if tail else []
                _log.info("lines of %s come from the log store: %s", src.label,
                          "asked with source='store'" if forced else "the pod is gone")
                streams.append((src.label, lines))
                continue
            live_text = self._api.pod_log(src.pod.metadata.name, **kwargs)
            if live_text is None:
                if len(sources) > 1:
                    continue  # the pod went away meanwhile (Workers end with the job)
                raise JobNotFoundError(f"job {name}: its {src.label} pod {src.pod.metadata.name} is gone", name=name)
            lines = live_text.splitlines()
            # The kubelet serves a pod's current log file only: the lines it rotated away come
            # from the store, before the first line it serves.
            if store and source == "auto" and tail is None and lines:
                first = lines[0].partition(" ")[0]
                if _logs.parse_ts(first) is not None:
                    older = self._api.stored_log(name, src.role, src.index, since_seconds=since_s, end=first).splitlines()
                    if older:
                        _log.info("the first %d lines of %s come from the log store: the kubelet rotated them out of "
                                  "the pod's log", len(older), src.label)
                        self.last_log_sources[src.label] = "log store, then pod"
                        lines = older + lines
            streams.append((src.label, lines))
        out = []
        for label, raw in _logs.merge_logs(streams):
            line = render(label, raw)
            if line is not None:
                out.append(line)
        return "\n".join(out) + ("\n" if out else "")

    def _follow(self, sources: list[tuple[str, Any]], kwargs: dict[str, Any], render: Callable[[str, str], str | None]) -> Iterator[str]:
        # One pod: stream it. Several: poll each in turn for new lines.
        if len(sources) == 1:
            label, pod = sources[0]
            for text in self._api.stream_pod_log(pod.metadata.name, **kwargs):
                line = render(label, text)
                if line is not None:
                    yield line
            return
        # Per pod: the time of the newest line printed, and the lines printed
        # at that very time (lines can share a timestamp).
        seen: dict[str, tuple[datetime, set[str]]] = {}
        active = list(sources)
        while active:
            running = False
            for label, pod in list(active):
                args = dict(kwargs)
                if label in seen:
                    args.pop("tail_lines", None)
                    args["since_seconds"] = max(1, int((_logs.now() - seen[label][0]).total_seconds()) + 2)
                log = self._api.pod_log(pod.metadata.name, **args)
                phase = self._api.pod_phase(pod.metadata.name) if log is not None else None
                if log is None or phase is None:
                    active.remove((label, pod))  # the pod went away (Workers end with the job)
                    continue
                for raw in log.splitlines():
                    t = _logs.parse_ts(raw.partition(" ")[0])
                    if t is not None and label in seen:
                        last, at_last = seen[label]
                        if t < last or (t == last and raw in at_last):
                            continue
                    if t is not None:
                        last, at_last = seen.get(label, (t, set()))
                        seen[label] = (t, at_last | {raw}) if t == last else (t, {raw})
                    line = render(label, raw)
                    if line is not None:
                        yield line
                running = running or phase in ("Pending", "Running")
            if not running:
                return
            time.sleep(1)

    def delete_job(self, name: str, grace_period: int | None = None, wait: bool = True, timeout: float = 120) -> None:
        if grace_period is not None and (isinstance(grace_period, bool) or not isinstance(grace_period, int) or grace_period < 0):
            raise InvalidJobError(f"grace_period={grace_period!r}: use whole seconds, 0 or more (0: at once), or None for each pod's own",
                                  field="grace_period")
        _v.check_seconds("timeout", timeout)
        self._api.delete_trainjob(name, grace_period)
        if grace_period is not None:
            # The garbage collector deletes the pods with their own grace period;
            # a second delete with a shorter one shortens it.
            self._api.delete_job_pods(name, grace_period)
        if not wait:
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            launcher, workers = self._api.job_pods(name)
            if not launcher and not workers and not self._api.trainjob_exists(name):
                return
            time.sleep(0.5)
        raise WaitTimeoutError(f"job {name}: pods still there after {timeout:g}s (deletion continues in the cluster)")

    def suspend_job(self, name: str) -> str:
        return self._set_suspended(name, True)

    def resume_job(self, name: str) -> str:
        return self._set_suspended(name, False)

    def _set_suspended(self, name: str, suspend: bool) -> str:
        # Go: queue.SetSuspended. Kueue sets a job's spec.suspend back within seconds (and its program
        # starts over): a job it manages goes through its Workload's spec.active.
        tj = self._api.get_trainjob(name)
        meta = tj.get("metadata") or {}
        verb = "suspended" if suspend else "resumed"
        if (meta.get("labels") or {}).get(QUEUE_LABEL):
            wl = self._api.set_workload_active(meta.get("uid", ""), not suspend)
            if wl is None:
                raise MPIJobError(f"MPI job {name}: the job's Kueue Workload does not exist yet: try again in a few seconds")
            return (f"{verb} through its Kueue Workload {wl} (spec.active {str(not suspend).lower()}): "
                    "Kueue manages the job, so its spec.suspend is Kueue's")
        self._api.patch_trainjob_suspend(name, suspend)
        return f"{verb} (spec.suspend {str(suspend).lower()})"

    def clone_job(self, name: str, new_name: str, **overrides: Any) -> MPIJob:
        _v.check_name(new_name)
        if "command" in overrides:
            # A clone replaces the command with another, never with the runtime's.
            _v.check_command(overrides["command"], runtimes=False)
        # create_job's arguments, but those a clone keeps (JobSpec).
        allowed = {*(set(JobSpec.field_names()) - set(CLONE_KEEPS)), "dry_run"}
        unknown = set(overrides) - allowed
        if unknown:
            raise InvalidJobError(f"clone_job does not know {sorted(unknown)}: use {sorted(allowed)}", field=sorted(unknown)[0])
        src = self._get(name)
        spec = src.get("spec") or {}
        meta = src.get("metadata") or {}
        ref = spec.get("runtimeRef") or {}
        rt = None
        base_kind = (meta.get("labels") or {}).get(_jobspec.BASE_RUNTIME_KIND_LABEL, "")
        if ref.get("kind") == "TrainingRuntime":
            rt = self._api.job_runtime(ref["name"])
            if not _jobspec.is_derived((rt.get("metadata") or {}).get("labels")):
                # On the namespace's own runtime itself: that is the base.
                rt, base_kind = None, "TrainingRuntime"
        base_name = (meta.get("labels") or {}).get(_jobspec.BASE_RUNTIME_LABEL) or ref.get("name", "")
        inp, kept = _jobspec.input_of(src, rt, self._runtime(base_name, base_kind))
        o = dict(overrides)
        # clone_job takes create_job's arguments and checks them the same way (the command above).
        command = o.get("command", inp.command or None)
        for f in ("image", "worker_image", "launcher_image"):
            if f in o:
                _v.check_image(f, o[f], runtimes=False)
        if "image" in o:
            inp.image, inp.worker_image, inp.launcher_image = o["image"], "", ""
        inp.worker_image = o.get("worker_image", inp.worker_image)
        inp.launcher_image = o.get("launcher_image", inp.launcher_image)
        inp.name = new_name
        inp.command = list(command or [])
        if "workers" in o:
            _v.check_int("workers", o["workers"], 1)
            inp.workers = o["workers"]
        if "slots_per_worker" in o:
            _v.check_int("slots_per_worker", o["slots_per_worker"], 1)
            inp.slots_per_worker = o["slots_per_worker"]
        if "runtime" in o:
            inp.runtime = o["runtime"]
        if "env" in o or "env_from_secret" in o:
            _v.check_str_map("env", o.get("env"))
            _v.warn_secret_looking(o.get("env"))
            env_by_name = {var["name"]: var for var in inp.env}
            for var in _v.env_list(o.get("env"), o.get("env_from_secret")):
                env_by_name[var["name"]] = var
            inp.env = list(env_by_name.values())
        for key in ("resources_per_worker", "launcher_resources"):
            if key in o:
                res = dict(getattr(inp, key) or {})
                res.update(_v.resources(key, o[key]))
                setattr(inp, key, res)
        if "node_selector" in o:
            _v.check_str_map("node_selector", o["node_selector"])
            inp.node_selector = dict(o["node_selector"] or {})
        if "queue" in o:
            inp.queue = o["queue"] or ""
        _scheduling(inp, {k: v for k, v in o.items() if k in SCHEDULING_ARGS})
        job = _b.build(inp, self._runtime(inp.runtime))
        tj = job.train_job
        if "volumes" in o:
            kept = [p for p in kept if p.get("manager") not in (PATCH_MANAGER, *_jobspec.LEGACY_PATCH_MANAGERS)]
            vols = _v.volumes(o["volumes"])
            if vols:
                kept.append(_b.patch(None, vols))
        if kept:
            tj["spec"].setdefault("runtimePatches", []).extend(kept)
        labels = {k: v for k, v in (meta.get("labels") or {}).items() if k not in (_jobspec.BASE_RUNTIME_LABEL, QUEUE_LABEL, _jobspec.PRIORITY_LABEL)}
        if labels:
            tj["metadata"].setdefault("labels", {}).update(labels)
        annotations = {k: v for k, v in (meta.get("annotations") or {}).items()
                       if k not in (STATUS_ANNOTATION, CREATOR_ANNOTATION, _jobspec.DESCRIPTION, "kubectl.kubernetes.io/last-applied-configuration")}
        if annotations:
            tj["metadata"].setdefault("annotations", {}).update(annotations)
        return self._create(job, bool(o.get("dry_run")))

    def convert_legacy(self, manifest: str | dict[str, Any]) -> dict[str, Any]:
        return _convert.convert(manifest, _convert.shipped_runtimes())

    def _get(self, name: str) -> dict[str, Any]:
        return self._api.get_trainjob(name)

    def _runtime(self, name: str, kind: str = "") -> dict[str, Any]:
        return self._api.base_runtime(name, kind)

    def _runtimes_safe(self) -> list[Runtime]:
        try:
            return self.list_runtimes()
        except MPIJobError:
            return []

    def _hosts_ranks(self, obj: dict[str, Any]) -> bool:
        try:
            return _b.launcher_hosts_ranks(self._runtime((obj.get("spec") or {}).get("runtimeRef", {}).get("name", "")))
        except MPIJobError:
            return False

    def _pods(self, name: str) -> tuple[list[Any], list[Any]]:
        return self._api.job_pods(name)


def _phase(pod: Any) -> str:
    return str(getattr(pod.status, "phase", "") or "") if pod.status is not None else ""


class _Source:
    """One log asked for: a pod's, or (``pod`` None) the log store's lines of its role and index."""

    def __init__(self, label: str, pod: Any, role: str, index: int | None):
        self.label, self.pod, self.role, self.index = label, pod, role, index


def _unreachable(backend: KubernetesBackend, e: Exception) -> APIUnreachableError:
    host = backend._api.host
    reason = getattr(e, "reason", None) or e
    return APIUnreachableError(f"cannot reach the Kubernetes API server at {host} ({type(reason).__name__}): check that the "
                               "cluster runs and that your kubeconfig context points at it (kubectl config current-context)")


def _reachable(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn a connection failure of ``fn`` (or of the iterator it returns) into APIUnreachableError."""
    @functools.wraps(fn)
    def wrapper(self: KubernetesBackend, *args: Any, **kwargs: Any) -> Any:
        try:
            out = fn(self, *args, **kwargs)
        except urllib3.exceptions.HTTPError as e:
            raise _unreachable(self, e) from None
        if inspect.isgenerator(out):
            return _reachable_iter(self, out)
        return out
    return wrapper


def _reachable_iter(backend: KubernetesBackend, it: Iterator[Any]) -> Iterator[Any]:
    try:
        yield from it
    except urllib3.exceptions.HTTPError as e:
        raise _unreachable(backend, e) from None


for _name, _fn in list(vars(KubernetesBackend).items()):
    if not _name.startswith("_") and callable(_fn):
        setattr(KubernetesBackend, _name, _reachable(_fn))


#: create_job's and clone_job's arguments for what a job sets besides its shape and data.
SCHEDULING_ARGS = ("timeout", "retries", "resume_from", "priority", "tolerations", "image_pull_secrets", "description", "launcher_flags",
                   "end_stuck_after", "grace_period", "service_account", "register_model", "register_artifact")


def _scheduling(inp: _jobspec.Input, args: dict[str, Any]) -> None:
    """Set on ``inp`` the scheduling arguments given (None: left as they are); the builder checks them."""
    if args.get("timeout") is not None:
        inp.timeout = _v.optional_str("timeout", args["timeout"], "2h")
    if args.get("retries") is not None:
        _v.check_int("retries", args["retries"], 0)
        inp.retries = args["retries"]
    if args.get("resume_from") is not None:
        inp.resume_from = _v.optional_str("resume_from", args["resume_from"], "digits")
    if args.get("priority") is not None:
        inp.priority = _v.optional_str("priority", args["priority"], "high")
    if args.get("tolerations") is not None:
        inp.tolerations = _v.tolerations(args["tolerations"])
    if args.get("image_pull_secrets") is not None:
        inp.image_pull_secrets = _v.names("image_pull_secrets", args["image_pull_secrets"])
    if args.get("description") is not None:
        inp.description = _v.optional_str("description", args["description"], "nightly run")
    if args.get("launcher_flags") is not None:
        inp.launcher_flags = _v.launcher_flags(args["launcher_flags"])
    if args.get("end_stuck_after") is not None:
        inp.end_stuck_after = _v.optional_str("end_stuck_after", args["end_stuck_after"], "30m")
    if args.get("grace_period") is not None:
        inp.grace_period = _v.optional_str("grace_period", args["grace_period"], "5m")
    if args.get("service_account") is not None:
        inp.service_account = _v.optional_str("service_account", args["service_account"], "trainer")
    if args.get("register_model") is not None:
        inp.register_model = _v.optional_str("register_model", args["register_model"], "digits-classifier:v1")
        if inp.register_model:
            parse_ref("register_model", inp.register_model, inp.name or "v1")
    if args.get("register_artifact") is not None:
        inp.register_artifact = _v.optional_str("register_artifact", args["register_artifact"], "model.onnx")

