"""``MPIJobClient``: the whole life of an MPI job from Python.

A first job::

    from mpijob import MPIJobClient

    client = MPIJobClient(namespace="team-a")
    client.create_job("hello", command=None, workers=2, slots_per_worker=2)
    client.wait_for_job("hello")          # raises JobFailedError with the diagnosis
    print(client.get_logs("hello"))
    client.delete_job("hello")
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import inspect
import re
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

import urllib3
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes import watch as k8s_watch
from kubernetes.client.rest import ApiException

from . import convert as _convert
from . import jobspec as _jobspec
from .errors import (
    APIUnreachableError,
    InvalidJobError,
    JobFailedError,
    JobNotFoundError,
    MPIJobError,
    WaitTimeoutError,
    from_api_exception,
)
from .redact import Redactor
from .types import (
    CREATOR_ANNOTATION,
    GROUP,
    NEVER_STARTS,
    PHASES,
    QUEUE_LABEL,
    STATUS_ANNOTATION,
    VERSION,
    JobEvent,
    JobStatus,
    LifecycleEvent,
    MPIJob,
    Runtime,
    event_kind,
    is_job_object,
)

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
PATCH_MANAGER = "mpijob.dev/python-sdk"
MAX_NAME = _jobspec.MAX_NAME  # JobSet's Launcher pod name "<name>-launcher-0-0-xxxxx" fits 63


class MPIJobClient:
    """A client for MPI jobs in one namespace.

    :param namespace: the namespace; default: the kubeconfig context's (or the pod's, in-cluster)
    :param context: kubeconfig context to use
    :param config_file: kubeconfig path (default: $KUBECONFIG or ~/.kube/config)

    In a pod, with no kubeconfig, it uses the pod's ServiceAccount.
    """

    def __init__(self, namespace: str | None = None, context: str | None = None,
                 config_file: str | None = None):
        api_client, default_ns = _load_config(context, config_file)
        self.namespace = namespace or default_ns or "default"
        self._api = api_client
        self._custom = k8s.CustomObjectsApi(api_client)
        self._core = k8s.CoreV1Api(api_client)

    # -- create ---------------------------------------------------------

    def create_job(
        self,
        name: str,
        command: Sequence[str] | None,
        workers: int,
        image: str | None = None,
        slots_per_worker: int | None = None,
        resources_per_worker: dict[str, str | int] | None = None,
        launcher_resources: dict[str, str | int] | None = None,
        runtime: str = "mpi-openmpi",
        env: dict[str, str] | None = None,
        node_selector: dict[str, str] | None = None,
        volumes: Sequence[dict[str, Any]] | None = None,
        queue: str | None = None,
        dry_run: bool = False,
        worker_image: str | None = None,
        launcher_image: str | None = None,
        env_from_secret: dict[str, str] | None = None,
    ) -> MPIJob:
        """Create an MPI job: a Launcher that runs ``command`` (None: the runtime's)
        and ``workers`` Workers with ``slots_per_worker`` ranks each.

        :param image: the image of the Launcher and the Workers (None: the runtime's)
        :param worker_image: the Workers' image only; ``launcher_image``: the Launcher's only
        :param resources_per_worker: requests and limits of each Worker, e.g.
            ``{"nvidia.com/gpu": 4, "memory": "32Gi", "cpu": 8}`` (any extended resource, such as
            ``amd.com/gpu``; a GPU count of 0 removes the runtime's), on every runtime
        :param launcher_resources: the Launcher's cpu and memory
            (images and resources go into a TrainingRuntime of the job's own, which the job owns)
        :param env: the Launcher's environment (``mpirun -x NAME`` passes it to ranks); a value
            that looks like a secret is taken with a warning: use ``env_from_secret`` for those
        :param env_from_secret: variables read from a key of a Secret in the job's namespace,
            ``{"AWS_SECRET_ACCESS_KEY": "s3-credentials:secret-key"}`` (``"SECRET"`` alone reads the
            key of the variable's name): the value stays out of the job, which every viewer reads
        :param node_selector: node labels the Launcher and Workers need
        :param volumes: ``[{"name": "data", "mount_path": "/data", "pvc": "dataset"}]``
            (or ``"config_map": ...``, ``"empty_dir": {}``), mounted in the Launcher and Workers
        :param queue: Kueue LocalQueue: the job waits Queued until it fits whole
        :param dry_run: let the cluster check the job (admission and quota included) without creating it

        Raises :class:`InvalidJobError` naming the argument (before any API call for bad settings),
        :class:`QuotaExceededError`, :class:`PermissionDeniedError`.

        >>> client.create_job("train", ["mpirun", "python3", "train.py"], workers=4,
        ...                   runtime="mpi-openmpi-gpu", resources_per_worker={"nvidia.com/gpu": 8})
        """
        if command is not None and (isinstance(command, str) or not all(isinstance(c, str) for c in command) or not command):
            raise InvalidJobError(f"command {command!r}: give a non-empty list of strings, e.g. ['mpirun', 'python3', 'train.py']", field="command")
        for f, v in (("image", image), ("worker_image", worker_image), ("launcher_image", launcher_image)):
            if v is not None and (not isinstance(v, str) or not v.strip()):
                raise InvalidJobError(f"{f}={v!r}: give an image reference, e.g. ghcr.io/mpijob/openmpi:4.1", field=f)
        _check_str_map("env", env)
        _warn_secret_looking(env)
        _check_str_map("node_selector", node_selector)
        vols = _volumes(volumes)
        inp = _jobspec.Input(
            name=name, namespace=self.namespace, runtime=runtime, workers=workers, slots_per_worker=slots_per_worker or 0,
            image=image or "", worker_image=worker_image or "", launcher_image=launcher_image or "",
            command=list(command or []), resources_per_worker=_resources("resources_per_worker", resources_per_worker),
            launcher_resources=_resources("launcher_resources", launcher_resources),
            env=_env_list(env, env_from_secret), node_selector=dict(node_selector or {}), queue=queue or "")
        if slots_per_worker is not None:
            _check_int("slots_per_worker", slots_per_worker, 1)
        _build(inp, _offline_runtime(runtime))  # what needs no cluster is checked first
        job = _build(inp, self._runtime(runtime))
        if vols:
            job.train_job["spec"].setdefault("runtimePatches", []).append(_patch(None, vols))
        return self._create(job, dry_run)

    def _create(self, job: _jobspec.Job, dry_run: bool) -> MPIJob:
        """Create the per-job runtime (if any), then the TrainJob, then give the
        runtime to the TrainJob; a refused or dry-run job takes its runtime with it."""
        body, rt = job.train_job, job.runtime
        name = body["metadata"]["name"]
        kwargs = {"dry_run": "All"} if dry_run else {}
        if rt is not None:
            self._create_runtime(rt)
        try:
            obj = self._create_trainjob(body, kwargs, retry=rt is not None)
        except ApiException as e:
            if rt is not None:
                self._delete_runtime(rt["metadata"]["name"])
            raise from_api_exception(e, name) from None
        if rt is not None:
            if dry_run:
                self._delete_runtime(rt["metadata"]["name"])
            else:
                # On failure mpijob-manager gives the runtime to its job.
                with contextlib.suppress(ApiException):
                    self._custom.patch_namespaced_custom_object(
                        GROUP, VERSION, self.namespace, "trainingruntimes", rt["metadata"]["name"],
                        {"metadata": {"ownerReferences": [_jobspec.owner_reference(obj)]}})
        return MPIJob.from_trainjob(obj)

    def _create_trainjob(self, body: dict[str, Any], kwargs: dict[str, Any], retry: bool) -> dict[str, Any]:
        """Create the TrainJob; right after its runtime, try again for up to 10 s while
        Trainer's webhook has not seen that runtime yet (its cache lags)."""
        deadline = time.monotonic() + 10
        delay = 0.1
        while True:
            try:
                created: dict[str, Any] = self._custom.create_namespaced_custom_object(GROUP, VERSION, self.namespace, "trainjobs", body, **kwargs)
                return created
            except ApiException as e:
                if not (retry and _jobspec.runtime_not_seen(e.body or e.reason or "") and time.monotonic() < deadline):
                    raise
            time.sleep(delay)
            delay = min(delay * 1.5, 1.0)

    def _create_runtime(self, rt: dict[str, Any]) -> None:
        name = rt["metadata"]["name"]
        rt["metadata"]["namespace"] = self.namespace
        deadline = time.monotonic() + 30
        while True:
            try:
                self._custom.create_namespaced_custom_object(GROUP, VERSION, self.namespace, "trainingruntimes", rt)
                return
            except ApiException as e:
                if e.status != 409:
                    raise from_api_exception(e, name) from None
            old = self._custom.get_namespaced_custom_object(GROUP, VERSION, self.namespace, "trainingruntimes", name)
            if ((old.get("metadata") or {}).get("labels") or {}).get(_jobspec.JOB_LABEL) != name:
                raise InvalidJobError(f"a TrainingRuntime named {name} already exists in namespace {self.namespace} and is not "
                                      "this job's: give the job another name", field="name")
            try:
                self._custom.get_namespaced_custom_object(GROUP, VERSION, self.namespace, "trainjobs", name)
                raise InvalidJobError(f"job {name} already exists in namespace {self.namespace}: pick another name or delete it first", field="name")
            except ApiException as e:
                if e.status != 404:
                    raise from_api_exception(e, name) from None
            # A runtime left by an earlier job of this name that is gone: replace it.
            self._delete_runtime(name)
            if time.monotonic() > deadline:
                raise WaitTimeoutError(f"the runtime {name} of an earlier job of this name is still being deleted; try again in a minute")
            time.sleep(0.5)

    def _delete_runtime(self, name: str) -> None:
        with contextlib.suppress(ApiException):
            self._custom.delete_namespaced_custom_object(GROUP, VERSION, self.namespace, "trainingruntimes", name)

    # -- read -----------------------------------------------------------

    def get_job(self, name: str) -> MPIJob:
        """The job ``name`` with its status (phase, Launcher, Workers ready/total,
        reason, message, next step, times, creator) as mpijob-manager wrote it.

        Raises :class:`JobNotFoundError`, with a close name if there is one.
        """
        obj = self._get(name)
        return MPIJob.from_trainjob(obj, self._hosts_ranks(obj))

    def list_jobs(self, runtime: str | None = None, phase: str | None = None) -> list[MPIJob]:
        """The namespace's MPI jobs, optionally only those on ``runtime`` or in ``phase``."""
        if phase is not None and phase not in PHASES:
            raise InvalidJobError(f"phase {phase!r}: use one of {', '.join(PHASES)}", field="phase")
        try:
            items = self._custom.list_namespaced_custom_object(GROUP, VERSION, self.namespace, "trainjobs")["items"]
        except ApiException as e:
            raise from_api_exception(e) from None
        rank_hosts = {r.name: r.launcher_hosts_ranks for r in self._runtimes_safe()}
        jobs = [MPIJob.from_trainjob(o, rank_hosts.get((o.get("spec") or {}).get("runtimeRef", {}).get("name"), False)) for o in items]
        return sorted((j for j in jobs if (runtime is None or j.runtime == runtime) and (phase is None or j.status.phase == phase)),
                      key=lambda j: j.name)

    def list_runtimes(self) -> list[Runtime]:
        """The MPI runtimes of the cluster."""
        try:
            items = self._custom.list_cluster_custom_object(GROUP, VERSION, "clustertrainingruntimes")["items"]
        except ApiException as e:
            raise from_api_exception(e) from None
        out = []
        for r in items:
            spec = r.get("spec") or {}
            if not ((spec.get("mlPolicy") or {}).get("mpi")):
                continue
            ann = (r.get("metadata") or {}).get("annotations") or {}
            out.append(Runtime(
                name=r["metadata"]["name"], mpi_implementation=ann.get("mpijob.dev/mpi-implementation", ""),
                description=ann.get("mpijob.dev/description", ""), launcher_hosts_ranks=_launcher_hosts_ranks(r),
                worker_image=_worker_image(r), raw=r))
        return sorted(out, key=lambda r: r.name)

    # -- wait and watch ---------------------------------------------------

    def wait_for_job(self, name: str, phases: Iterable[str] = ("Succeeded",), timeout: float = 600,
                     poll_interval: float = 2) -> MPIJob:
        """Wait until the job is in one of ``phases``; returns it.

        Raises :class:`JobFailedError` (with the diagnosis in ``.status``) when it
        finishes in another phase or can never start (reason ``CannotStart`` or
        ``PodsRefused``), :class:`WaitTimeoutError` after ``timeout`` seconds.

        >>> client.wait_for_job("hello", phases=["Running"], timeout=120)
        """
        # One phase may be given alone.
        wanted = {phases} if isinstance(phases, str) else set(phases)
        for p in wanted:
            if p not in PHASES:
                raise InvalidJobError(f"phases: {p!r} is not a phase; use {', '.join(PHASES)}", field="phases")
        _check_seconds("timeout", timeout)
        _check_seconds("poll_interval", poll_interval)
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
        """Yield the job's lifecycle as it happens until it finishes or ``timeout`` seconds pass:
        submitted, then each phase the manager reports (queued, scheduling, running, completed,
        failed) with its message, ``progress`` when the number of ready Workers changes, and
        (``events=True``) each Kubernetes Event about the job's objects, as :meth:`get_events`.

        >>> for ev in client.watch("hello"):
        ...     print(ev.kind, ev.message)
        """
        job = self.get_job(name)
        yield LifecycleEvent("submitted", job.status.phase, f"job {name} on runtime {job.runtime}", job.status, _now())
        last_phase, last_ready = None, None
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
            w = k8s_watch.Watch()
            try:
                stream = w.stream(self._custom.list_namespaced_custom_object, GROUP, VERSION, self.namespace, "trainjobs",
                                  field_selector=f"metadata.name={name}",
                                  timeout_seconds=max(1, min(5, int(deadline - time.monotonic()))))
                for ev in stream:
                    if ev["type"] == "DELETED":
                        return
                    status = JobStatus.from_trainjob(ev["object"])
                    # Only what the manager said, and only with its words: no phase guessed
                    # before it wrote one, no empty message.
                    if status.from_manager and status.message and status.phase != last_phase:
                        last_phase = status.phase
                        yield LifecycleEvent(event_kind(status.phase), status.phase, status.message, status, _now())
                    ready = (status.workers_ready, status.workers_total)
                    if status.from_manager and not status.finished and status.workers_total and ready != last_ready:
                        if last_ready is not None or status.workers_ready:
                            yield LifecycleEvent("progress", status.phase, f"Workers ready {ready[0]}/{ready[1]}", status, _now())
                        last_ready = ready
                    if status.finished:
                        w.stop()
                        yield from new_events()
                        return
            except ApiException as e:
                raise from_api_exception(e, name) from None
            finally:
                w.stop()
            yield from new_events()

    def get_events(self, name: str) -> list[JobEvent]:
        """The Kubernetes Events of the job's own objects (the TrainJob, its JobSet, Jobs, pods
        and Kueue Workload, matched by exact name: job ``hello`` never gets ``hello-4``'s),
        oldest first, as ``kubectl mpijob events`` shows them.

        >>> for e in client.get_events("hello"):
        ...     print(e.type, e.reason, e.message)
        """
        try:
            evs = self._core.list_namespaced_event(self.namespace).items
        except ApiException as e:
            raise from_api_exception(e, name) from None
        out: list[JobEvent] = []
        for ev in evs:
            o = ev.involved_object
            if o is None or not is_job_object(name, o.kind or "", o.name or ""):
                continue
            out.append(JobEvent(type=ev.type or "", reason=ev.reason or "", message=ev.message or "", kind=o.kind or "",
                                object=o.name or "", time=ev.last_timestamp or ev.event_time or ev.first_timestamp
                                or (ev.metadata.creation_timestamp if ev.metadata else None), count=ev.count or 1))
        epoch = datetime.min.replace(tzinfo=timezone.utc)
        out.sort(key=lambda x: x.time or epoch)
        return out

    # -- logs ---------------------------------------------------------------

    def get_logs(self, name: str, worker: int | str | None = None, follow: bool = False,
                 since: int | str | timedelta | None = None, until: datetime | None = None,
                 tail: int | None = None, grep: str | None = None, redact: bool = True) -> str | Iterator[str]:
        """Logs of the Launcher (``worker=None``), one Worker (an index) or all of them merged by
        time (``worker="all"``, each line prefixed ``[launcher]`` / ``[worker-N]``).

        ``since`` is seconds, a timedelta or a duration such as ``"5m"`` or ``"1h30m"``; ``until``
        (a datetime) drops newer lines; ``grep`` is a regular
        expression; secrets are redacted as ``kubectl mpijob logs`` does. With ``follow=True``
        it returns an iterator of lines that ends when the pods stop.

        >>> print(client.get_logs("hello", worker="all", grep=r"rank \\d"))
        """
        rx = None
        if grep is not None:
            try:
                rx = re.compile(grep)
            except re.error as e:
                raise InvalidJobError(f"grep {grep!r} is not a regular expression: {e}", field="grep") from None
        if tail is not None:
            _check_int("tail", tail, 0)
        since_s = None
        if since is not None:
            since_s = _seconds("since", since)
        if until is not None and not isinstance(until, datetime):
            raise InvalidJobError(f"until={until!r}: use a datetime, e.g. datetime.now(timezone.utc) - timedelta(minutes=5)", field="until")
        if not (worker is None or worker == "all" or (isinstance(worker, int) and worker >= 0)):
            raise InvalidJobError(f"worker {worker!r}: use None (the Launcher), a Worker index, or 'all'", field="worker")
        obj = self._get(name)
        launcher, workers = self._pods(name)
        if worker is None:
            if not launcher:
                raise JobNotFoundError(f"job {name} has no Launcher pod yet (phase {JobStatus.from_trainjob(obj).phase}); "
                                       "try worker='all'", name=name)
            sources = [("launcher", launcher[0])]
        elif worker == "all":
            sources = ([("launcher", launcher[0])] if launcher else []) + [(f"worker-{i}", p) for i, p in enumerate(workers)]
        else:
            assert isinstance(worker, int)
            if worker >= len(workers):
                raise JobNotFoundError(f"worker {worker}: job {name} has {len(workers)} Worker pods", name=name)
            sources = [(f"worker-{worker}", workers[worker])]
        if not sources:
            raise JobNotFoundError(f"job {name} has no pods yet", name=name)
        prefix = len(sources) > 1
        redactors = {label: Redactor() for label, _ in sources}

        def render(label: str, raw: str) -> str | None:
            ts, _, text = raw.partition(" ")
            t = _parse_ts(ts)
            if t is None:
                text = raw
            if until is not None and t is not None and t > until.astimezone(timezone.utc):
                return None
            if redact:
                text = redactors[label].line(text)
            if rx is not None and not rx.search(text):
                return None
            return (f"[{label}] " if prefix else "") + text

        kwargs: dict[str, Any] = {"timestamps": True}
        if since_s:
            kwargs["since_seconds"] = since_s
        if tail is not None:
            kwargs["tail_lines"] = tail
        if follow:
            return self._follow(sources, kwargs, render)
        streams = []
        for label, pod in sources:
            try:
                text = self._core.read_namespaced_pod_log(pod.metadata.name, self.namespace, **kwargs)
            except ApiException as e:
                if e.status == 404 and len(sources) > 1:
                    continue  # the pod went away meanwhile (Workers end with the job)
                raise from_api_exception(e, name) from None
            streams.append((label, text.splitlines()))
        out = []
        for label, raw in merge_logs(streams):
            line = render(label, raw)
            if line is not None:
                out.append(line)
        return "\n".join(out) + ("\n" if out else "")

    def _follow(self, sources: list[tuple[str, Any]], kwargs: dict[str, Any], render: Callable[[str, str], str | None]) -> Iterator[str]:
        # One pod: stream it. Several: poll each in turn for new lines.
        if len(sources) == 1:
            label, pod = sources[0]
            resp = self._core.read_namespaced_pod_log(pod.metadata.name, self.namespace, follow=True,
                                                      _preload_content=False, **kwargs)
            for raw in resp.stream():
                for text in raw.decode("utf-8", "replace").splitlines():
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
                    args["since_seconds"] = max(1, int((_now() - seen[label][0]).total_seconds()) + 2)
                try:
                    text = self._core.read_namespaced_pod_log(pod.metadata.name, self.namespace, **args)
                    phase = self._core.read_namespaced_pod(pod.metadata.name, self.namespace).status.phase
                except ApiException as e:
                    if e.status != 404:
                        raise from_api_exception(e) from None
                    active.remove((label, pod))  # the pod went away (Workers end with the job)
                    continue
                for raw in text.splitlines():
                    t = _parse_ts(raw.partition(" ")[0])
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

    # -- delete, clone --------------------------------------------------------

    def delete_job(self, name: str, grace_period: int | None = None, wait: bool = True, timeout: float = 120) -> None:
        """Delete the job; with ``wait`` (default) return once its Launcher and Workers are gone.

        ``grace_period`` is the seconds the Launcher and Workers get to stop after SIGTERM
        (0: at once; None: each pod's own, 30 s by default), as ``kubectl mpijob delete --grace-period``.
        """
        if grace_period is not None and (isinstance(grace_period, bool) or not isinstance(grace_period, int) or grace_period < 0):
            raise InvalidJobError(f"grace_period={grace_period!r}: use whole seconds, 0 or more (0: at once), or None for each pod's own",
                                  field="grace_period")
        _check_seconds("timeout", timeout)
        body = k8s.V1DeleteOptions(propagation_policy="Foreground", grace_period_seconds=grace_period)
        try:
            self._custom.delete_namespaced_custom_object(GROUP, VERSION, self.namespace, "trainjobs", name, body=body)
        except ApiException as e:
            if e.status == 404:
                self._get(name)  # a "did you mean" error
            raise from_api_exception(e, name) from None
        if grace_period is not None:
            # The garbage collector deletes the pods with their own grace period;
            # a second delete with a shorter one shortens it.
            try:
                self._core.delete_collection_namespaced_pod(self.namespace, label_selector=f"{JOBSET_NAME}={name}",
                                                            grace_period_seconds=grace_period)
            except ApiException as e:
                if e.status != 404:
                    raise from_api_exception(e, name) from None
        if not wait:
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pods = self._core.list_namespaced_pod(self.namespace, label_selector=f"{JOBSET_NAME}={name}").items
            if not pods:
                try:
                    self._custom.get_namespaced_custom_object(GROUP, VERSION, self.namespace, "trainjobs", name)
                except ApiException as e:
                    if e.status == 404:
                        return
                    raise from_api_exception(e, name) from None
            time.sleep(0.5)
        raise WaitTimeoutError(f"job {name}: pods still there after {timeout:g}s (deletion continues in the cluster)")

    def clone_job(self, name: str, new_name: str, **overrides: Any) -> MPIJob:
        """Submit a copy of job ``name`` as ``new_name``, changed by ``overrides`` (the keyword
        arguments of :meth:`create_job`: ``workers``, ``command``, ``image``, ``env``, ...).
        The original is untouched.

        >>> client.clone_job("hello", "hello-4", workers=4)
        """
        _check_name(new_name)
        if "command" in overrides:
            command = overrides["command"]
            if isinstance(command, str) or not command or not all(isinstance(c, str) for c in command):
                raise InvalidJobError(f"command {command!r}: give a non-empty list of strings, e.g. ['mpirun', 'python3', 'train.py']", field="command")
        allowed = {"command", "workers", "image", "worker_image", "launcher_image", "slots_per_worker", "resources_per_worker",
                   "launcher_resources", "runtime", "env", "env_from_secret", "node_selector", "volumes", "queue", "dry_run"}
        unknown = set(overrides) - allowed
        if unknown:
            raise InvalidJobError(f"clone_job does not know {sorted(unknown)}: use {sorted(allowed)}", field=sorted(unknown)[0])
        src = self._get(name)
        spec = src.get("spec") or {}
        meta = src.get("metadata") or {}
        ref = spec.get("runtimeRef") or {}
        rt = None
        if ref.get("kind") == "TrainingRuntime":
            try:
                rt = self._custom.get_namespaced_custom_object(GROUP, VERSION, self.namespace, "trainingruntimes", ref["name"])
            except ApiException as e:
                raise from_api_exception(e, ref["name"]) from None
        base_name = (meta.get("labels") or {}).get(_jobspec.BASE_RUNTIME_LABEL) or ref.get("name", "")
        inp, kept = _jobspec.input_of(src, rt, self._runtime(base_name))
        o = dict(overrides)
        # clone_job takes create_job's arguments and checks them the same way.
        command = o.get("command", inp.command or None)
        if "command" in o and (isinstance(command, str) or not command or not all(isinstance(c, str) for c in command)):
            raise InvalidJobError(f"command {command!r}: give a non-empty list of strings, e.g. ['mpirun', 'python3', 'train.py']", field="command")
        for f in ("image", "worker_image", "launcher_image"):
            if f in o and (not isinstance(o[f], str) or not o[f].strip()):
                raise InvalidJobError(f"{f}={o[f]!r}: give an image reference, e.g. ghcr.io/mpijob/openmpi:4.1", field=f)
        if "image" in o:
            inp.image, inp.worker_image, inp.launcher_image = o["image"], "", ""
        inp.worker_image = o.get("worker_image", inp.worker_image)
        inp.launcher_image = o.get("launcher_image", inp.launcher_image)
        inp.name = new_name
        inp.command = list(command or [])
        if "workers" in o:
            _check_int("workers", o["workers"], 1)
            inp.workers = o["workers"]
        if "slots_per_worker" in o:
            _check_int("slots_per_worker", o["slots_per_worker"], 1)
            inp.slots_per_worker = o["slots_per_worker"]
        if "runtime" in o:
            inp.runtime = o["runtime"]
        if "env" in o or "env_from_secret" in o:
            _check_str_map("env", o.get("env"))
            _warn_secret_looking(o.get("env"))
            env_by_name = {var["name"]: var for var in inp.env}
            for var in _env_list(o.get("env"), o.get("env_from_secret")):
                env_by_name[var["name"]] = var
            inp.env = list(env_by_name.values())
        for key in ("resources_per_worker", "launcher_resources"):
            if key in o:
                res = dict(getattr(inp, key) or {})
                res.update(_resources(key, o[key]))
                setattr(inp, key, res)
        if "node_selector" in o:
            _check_str_map("node_selector", o["node_selector"])
            inp.node_selector = dict(o["node_selector"] or {})
        if "queue" in o:
            inp.queue = o["queue"] or ""
        job = _build(inp, self._runtime(inp.runtime))
        tj = job.train_job
        if "volumes" in o:
            kept = [p for p in kept if p.get("manager") not in (PATCH_MANAGER, *_jobspec.LEGACY_PATCH_MANAGERS)]
            vols = _volumes(o["volumes"])
            if vols:
                kept.append(_patch(None, vols))
        if kept:
            tj["spec"].setdefault("runtimePatches", []).extend(kept)
        labels = {k: v for k, v in (meta.get("labels") or {}).items() if k not in (_jobspec.BASE_RUNTIME_LABEL, QUEUE_LABEL)}
        if labels:
            tj["metadata"].setdefault("labels", {}).update(labels)
        annotations = {k: v for k, v in (meta.get("annotations") or {}).items()
                       if k not in (STATUS_ANNOTATION, CREATOR_ANNOTATION, "kubectl.kubernetes.io/last-applied-configuration")}
        if annotations:
            tj["metadata"]["annotations"] = annotations
        return self._create(job, bool(o.get("dry_run")))

    # -- migration ----------------------------------------------------------

    def convert_legacy(self, manifest: str | dict[str, Any]) -> dict[str, Any]:
        """Convert a legacy ``kubeflow.org/v2beta1`` MPIJob (YAML text or dict) like
        ``kubectl mpijob convert``: returns ``{"trainJob": ..., "runtime": ... or None, "notes": [...]}``,
        each note ``{"field", "action" (mapped/changed/dropped), "detail"}``. ``runtime`` is the
        job's own namespaced TrainingRuntime (the legacy images and resources), to create before
        the TrainJob; volumes and scheduling are in the TrainJob's ``runtimePatches``. The base
        runtimes are read from the cluster. Raises :class:`InvalidJobError` naming the bad field.
        """
        return _convert.convert(manifest, {r.name: r.raw for r in self.list_runtimes()})

    # -- helpers --------------------------------------------------------------

    def _get(self, name: str) -> dict[str, Any]:
        try:
            obj: dict[str, Any] = self._custom.get_namespaced_custom_object(GROUP, VERSION, self.namespace, "trainjobs", name)
            return obj
        except ApiException as e:
            if e.status != 404:
                raise from_api_exception(e, name) from None
        names = []
        with contextlib.suppress(ApiException):
            names = [o["metadata"]["name"] for o in
                     self._custom.list_namespaced_custom_object(GROUP, VERSION, self.namespace, "trainjobs")["items"]]
        close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
        msg = f"MPI job {name!r} not found in namespace {self.namespace}"
        if close:
            msg += f": did you mean {close[0]!r}?"
        raise JobNotFoundError(msg, name=name, suggestion=close[0] if close else None)

    def _runtime(self, name: str) -> dict[str, Any]:
        try:
            rt: dict[str, Any] = self._custom.get_cluster_custom_object(GROUP, VERSION, "clustertrainingruntimes", name)
        except ApiException as e:
            if e.status != 404:
                raise from_api_exception(e) from None
            names = [r.name for r in self._runtimes_safe()]
            close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
            hint = f": did you mean {close[0]!r}?" if close else (f": MPI runtimes are {', '.join(names)}" if names else "")
            raise InvalidJobError(f"runtime {name!r} does not exist{hint}", field="runtime") from None
        if not ((rt.get("spec") or {}).get("mlPolicy") or {}).get("mpi"):
            raise InvalidJobError(f"runtime {name!r} is not an MPI runtime (it has no MPI policy)", field="runtime")
        return rt

    def _runtimes_safe(self) -> list[Runtime]:
        try:
            return self.list_runtimes()
        except MPIJobError:
            return []

    def _hosts_ranks(self, obj: dict[str, Any]) -> bool:
        try:
            return _launcher_hosts_ranks(self._runtime((obj.get("spec") or {}).get("runtimeRef", {}).get("name", "")))
        except MPIJobError:
            return False

    def _pods(self, name: str) -> tuple[list[Any], list[Any]]:
        try:
            pods = self._core.list_namespaced_pod(self.namespace, label_selector=f"{JOBSET_NAME}={name}").items
        except ApiException as e:
            raise from_api_exception(e, name) from None
        launcher = sorted((p for p in pods if p.metadata.labels.get(REPLICATED_JOB) == "launcher"),
                          key=lambda p: p.metadata.creation_timestamp, reverse=True)
        workers = sorted((p for p in pods if p.metadata.labels.get(REPLICATED_JOB) == "node"),
                         key=lambda p: int(p.metadata.labels.get(COMPLETION_INDEX, "0")))
        return launcher, workers


def _unreachable(client: MPIJobClient, e: Exception) -> APIUnreachableError:
    host = getattr(getattr(getattr(client, "_api", None), "configuration", None), "host", "") or "the API server"
    reason = getattr(e, "reason", None) or e
    return APIUnreachableError(f"cannot reach the Kubernetes API server at {host} ({type(reason).__name__}): check that the "
                               "cluster runs and that your kubeconfig context points at it (kubectl config current-context)")


def _reachable(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn a connection failure of ``fn`` (or of the iterator it returns) into APIUnreachableError."""
    @functools.wraps(fn)
    def wrapper(self: MPIJobClient, *args: Any, **kwargs: Any) -> Any:
        try:
            out = fn(self, *args, **kwargs)
        except urllib3.exceptions.HTTPError as e:
            raise _unreachable(self, e) from None
        if inspect.isgenerator(out):
            return _reachable_iter(self, out)
        return out
    return wrapper


def _reachable_iter(client: MPIJobClient, it: Iterator[Any]) -> Iterator[Any]:
    try:
        yield from it
    except urllib3.exceptions.HTTPError as e:
        raise _unreachable(client, e) from None


for _name, _fn in list(vars(MPIJobClient).items()):
    if not _name.startswith("_") and callable(_fn):
        setattr(MPIJobClient, _name, _reachable(_fn))


def merge_logs(streams: Sequence[tuple[str, Sequence[str]]]) -> list[tuple[str, str]]:
    """Merge pod logs (lines that start with the kubelet's RFC 3339 time) by time; stable,
    and a line without a time stays after its stream's previous line."""
    items: list[tuple[datetime, int, int, str, str]] = []
    for i, (label, lines) in enumerate(streams):
        last = datetime.min.replace(tzinfo=timezone.utc)
        for raw in lines:
            t = _parse_ts(raw.partition(" ")[0])
            if t is not None:
                last = t
            items.append((last, i, len(items), label, raw))
    items.sort(key=lambda it: (it[0], it[2]))
    return [(label, raw) for _, _, _, label, raw in items]


def _parse_ts(ts: str) -> datetime | None:
    m = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)$", ts)
    if not m:
        return None
    frac = (m.group(2) or ".0")[1:7].ljust(6, "0")
    tz = "+00:00" if m.group(3) == "Z" else m.group(3)
    return datetime.fromisoformat(f"{m.group(1)}.{frac}{tz}")


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _load_config(context: str | None, config_file: str | None) -> tuple[Any, str | None]:
    try:
        cfg = k8s.Configuration()
        k8s_config.load_kube_config(config_file=config_file, context=context, client_configuration=cfg)
        _, active = k8s_config.list_kube_config_contexts(config_file=config_file)
        if context:
            contexts, _ = k8s_config.list_kube_config_contexts(config_file=config_file)
            active = next((c for c in contexts if c["name"] == context), active)
        ns = (active or {}).get("context", {}).get("namespace")
        return k8s.ApiClient(cfg), ns
    except (k8s_config.ConfigException, FileNotFoundError, TypeError) as kube_err:
        if context or config_file:
            raise MPIJobError(f"cannot load kubeconfig (context={context!r}, config_file={config_file!r}): {kube_err}") from None
        try:
            cfg = k8s.Configuration()
            k8s_config.load_incluster_config(client_configuration=cfg)
        except k8s_config.ConfigException:
            raise MPIJobError("no kubeconfig ($KUBECONFIG, ~/.kube/config) and not in a pod: "
                              "pass config_file= or context=") from None
        ns = None
        try:
            with open("/var/run/secrets/kubernetes.io/serviceaccount/namespace") as f:
                ns = f.read().strip()
        except OSError:
            pass
        return k8s.ApiClient(cfg), ns


def _check_name(name: Any) -> None:
    if not isinstance(name, str) or not _NAME.match(name) or len(name) > MAX_NAME:
        raise InvalidJobError(
            f"name {name!r}: use at most {MAX_NAME} lower-case letters, digits and '-', starting and ending "
            "with a letter or digit", field="name")


def _check_int(field: str, v: Any, minimum: int) -> None:
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise InvalidJobError(f"{field}={v!r}: use an integer of at least {minimum}", field=field)


def _env_list(env: dict[str, str] | None, from_secret: dict[str, str] | None) -> list[dict[str, Any]]:
    """Variables with values, then variables read from Secrets (``NAME: "SECRET[:KEY]"``);
    a name in both takes the Secret's."""
    _check_str_map("env_from_secret", from_secret)
    out: dict[str, dict[str, Any]] = {k: {"name": k, "value": v} for k, v in (env or {}).items()}
    for k, ref in (from_secret or {}).items():
        secret, _, key = ref.partition(":")
        if not secret:
            raise InvalidJobError(f"env_from_secret[{k!r}]={ref!r}: use 'SECRET' or 'SECRET:KEY', e.g. "
                                  "{'AWS_SECRET_ACCESS_KEY': 's3-credentials:secret-key'}", field="env_from_secret")
        out[k] = {"name": k, "valueFrom": {"secretKeyRef": {"name": secret, "key": key or k}}}
    return list(out.values())


def _warn_secret_looking(env: dict[str, str] | None) -> None:
    """Warn about an env value that looks like a secret (the redaction rules find one)."""
    for k, v in (env or {}).items():
        r = Redactor()
        r.line(f"{k}={v}")
        if r.count:
            warnings.warn(f"env {k}: the value looks like a secret, and every viewer of the job reads it; put it in "
                          f"a Secret and use env_from_secret={{{k!r}: 'SECRET:KEY'}}", UserWarning, stacklevel=3)


_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


def _seconds(field: str, v: Any) -> int:
    """Seconds from an int, a timedelta or a duration such as "90s", "5m", "1h30m"."""
    secs: int | None = None
    if isinstance(v, timedelta):
        secs = int(v.total_seconds())
    elif isinstance(v, int) and not isinstance(v, bool):
        secs = v
    elif isinstance(v, str) and v and (m := _DURATION.match(v.strip())) and any(m.groups()):
        h, mi, se = (int(x or 0) for x in m.groups())
        secs = h * 3600 + mi * 60 + se
    if secs is None or secs <= 0:
        raise InvalidJobError(f"{field}={v!r}: use a positive number of seconds, a timedelta, or a duration such as '5m' or '1h30m'",
                              field=field)
    return secs


def _check_seconds(field: str, v: Any) -> None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
        raise InvalidJobError(f"{field}={v!r}: use a positive number of seconds", field=field)


def _check_str_map(field: str, m: Any) -> None:
    if m is None:
        return
    if not isinstance(m, dict) or not all(isinstance(k, str) and k and isinstance(v, str) for k, v in m.items()):
        raise InvalidJobError(f"{field}={m!r}: use a dict of non-empty string keys to string values", field=field)


def _resources(field: str, res: Any) -> dict[str, str]:
    if not res:
        return {}
    if not isinstance(res, dict):
        raise InvalidJobError(f"{field}={res!r}: use a dict such as {{'nvidia.com/gpu': 4, 'memory': '32Gi'}}", field=field)
    out = {}
    for k, v in res.items():
        if isinstance(v, bool) or not isinstance(v, (int, str)):
            raise InvalidJobError(f"{field}[{k!r}]={v!r} is not a quantity (e.g. 4, '500m', '16Gi')", field=field)
        out[str(k)] = str(v)
    return out


def _requirements(res: dict[str, str]) -> dict[str, Any]:
    # Memory and extended resources (GPUs) are limited; CPU is only requested.
    return {"requests": dict(res), "limits": {k: v for k, v in res.items() if k != "cpu"}}


def _volumes(volumes: Any) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    out = []
    for i, v in enumerate(volumes or []):
        if not isinstance(v, dict) or not v.get("name") or not v.get("mount_path"):
            raise InvalidJobError(f"volumes[{i}]={v!r}: give name, mount_path and one of pvc, config_map, empty_dir", field="volumes")
        if "pvc" in v:
            src = {"persistentVolumeClaim": {"claimName": v["pvc"]}}
        elif "config_map" in v:
            src = {"configMap": {"name": v["config_map"]}}
        elif "empty_dir" in v:
            src = {"emptyDir": v["empty_dir"] or {}}
        else:
            raise InvalidJobError(f"volumes[{i}] ({v['name']}): give one of pvc, config_map, empty_dir", field="volumes")
        out.append(({"name": v["name"], **src},
                    {"name": v["name"], "mountPath": v["mount_path"], "readOnly": bool(v.get("read_only", False))}))
    return out


def _patch(node_selector: dict[str, str] | None, vols: list[tuple[dict[str, Any], dict[str, Any]]]) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if vols:
        spec["volumes"] = [v for v, _ in vols]
        spec["containers"] = [{"name": "node", "volumeMounts": [m for _, m in vols]}]
    return {"manager": PATCH_MANAGER, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
        {"name": rj, "template": {"spec": {"template": {"spec": spec}}}} for rj in ("launcher", "node")]}}}}


def _launcher_hosts_ranks(rt: dict[str, Any]) -> bool:
    return bool((((rt.get("spec") or {}).get("mlPolicy") or {}).get("mpi") or {}).get("runLauncherAsNode"))


def _worker_image(rt: dict[str, Any]) -> str:
    for rj in ((rt.get("spec") or {}).get("template") or {}).get("spec", {}).get("replicatedJobs") or []:
        if rj.get("name") == "node":
            for c in rj["template"]["spec"]["template"]["spec"].get("containers") or []:
                if c.get("name") == "node":
                    return str(c.get("image", ""))
    return ""


def _build(inp: _jobspec.Input, base: dict[str, Any]) -> _jobspec.Job:
    try:
        return _jobspec.build(inp, base)
    except _jobspec.BuildError as e:
        raise InvalidJobError(str(e), field=e.field.split(".", 1)[0]) from None


def _offline_runtime(name: str) -> dict[str, Any]:
    """A stand-in MPI runtime for checking settings before the cluster is asked."""
    return {"metadata": {"name": name}, "spec": {"mlPolicy": {"mpi": {}}, "template": {"spec": {"replicatedJobs": []}}}}
