"""``MPIJobClient``: the whole life of an MPI job from Python.

A first job::

    from mpijob import MPIJobClient

    client = MPIJobClient(namespace="team-a")
    client.create_job("hello", command=None, workers=2, slots_per_worker=2)
    client.wait_for_job("hello")          # raises JobFailedError with the diagnosis
    print(client.get_logs("hello"))
    client.delete_job("hello")

The client is a facade: each call is documented here and carried out by a backend
(``mpijob.backends``; ``KubernetesBackend`` for a cluster).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any

from . import progress as _progress
from .backends import Backend, KubernetesBackend
from .errors import InvalidJobError
from .registry import Registration
from .stacks import Stacks
from .types import (
    JobEvent,
    JobSpec,
    LifecycleEvent,
    MPIJob,
    Runtime,
)


class MPIJobClient:
    """A client for MPI jobs in one namespace.

        :param namespace: the namespace; default: the kubeconfig context's (or the pod's, in-cluster)
        :param context: kubeconfig context to use
        :param config_file: kubeconfig path (default: $KUBECONFIG or ~/.kube/config)

        In a pod, with no kubeconfig, it uses the pod's ServiceAccount.
        """

    def __init__(self, namespace: str | None = None, context: str | None = None,
                 config_file: str | None = None, backend: Backend | None = None):
        """``backend`` replaces the cluster's (tests, other execution backends)."""
        self._backend = backend or KubernetesBackend.from_kubeconfig(namespace, context, config_file)
        self.namespace = self._backend.namespace

    @property
    def last_log_sources(self) -> dict[str, str]:
        """Where get_logs' last call read each pod's lines: "pod", "log store" or "log store, then pod"."""
        return self._backend.last_log_sources

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
        data_connection: str | Sequence[str] | None = None,
        pvc: str | Sequence[str] | None = None,
        config_map: str | Sequence[str] | None = None,
        timeout: str | None = None,
        retries: int | None = None,
        resume_from: str | None = None,
        priority: str | None = None,
        tolerations: Sequence[str | dict[str, Any]] | None = None,
        image_pull_secrets: str | Sequence[str] | None = None,
        description: str | None = None,
        launcher_flags: str | Sequence[str] | None = None,
        end_stuck_after: str | None = None,
        grace_period: str | None = None,
        service_account: str | None = None,
        register_model: str | None = None,
        register_artifact: str | None = None,
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
        :param data_connection: an S3 data connection (OpenShift AI connection Secret in the
            namespace), or several: their keys reach the Launcher and every Worker as Secret
            references (the first one's as ``AWS_*``), and ``$MPIJOB_OUTPUT_URI`` is
            ``s3://BUCKET/NAME/``, where :meth:`get_artifacts` reads
        :param pvc: a PersistentVolumeClaim (``"claim"`` or ``"claim:/mount/path"``, default
            ``/mnt/claim``), or several, mounted on the Launcher and every Worker
        :param config_map: a ConfigMap of the namespace (``"name"`` or ``"name:/mount/path"``,
            default ``/config/name``), or several, mounted read-only on the Launcher and every
            Worker, each key a file
        :param timeout: stop the job once it has run this long, e.g. ``"90m"``, ``"2h"`` or ``"1h30m"``
            (reason DeadlineExceeded; None: no limit)
        :param retries: start the whole job again after a failure, up to this many times (0-10): every
            Worker and the Launcher anew; the program resumes from its last checkpoint in
            ``$MPIJOB_CHECKPOINT_URI`` (``s3://BUCKET/NAME/checkpoints/``, see :mod:`mpijob.checkpoint`)
        :param resume_from: start from another job's last checkpoint when this job has none of its
            own yet: that job's name, or its checkpoint folder ``s3://BUCKET/PATH/`` or
            ``file:///PATH/`` (needs ``data_connection`` or ``pvc``; the program reads
            ``$MPIJOB_RESUME_FROM``)
        :param priority: the Kueue WorkloadPriorityClass of the job (with ``queue``)
        :param tolerations: taints the Launcher and Workers tolerate, ``"KEY[=VALUE][:EFFECT]"``
            (e.g. ``"dedicated=mpi:NoSchedule"``; no value: any value) or a pod's toleration dicts
        :param image_pull_secrets: a Secret of the namespace to pull the images with, or several
        :param description: a line about the job (at most 500 characters), shown by describe and the dashboard
        :param launcher_flags: flags for mpirun (or mpiexec) before the program, ``"--bind-to none"`` or
            a list; added to ``command``, or to the runtime's command
        :param end_stuck_after: end the job when it can never finish (a rank failed while the others
            wait, an image that cannot be pulled, Workers no node can take) and has said so this long,
            e.g. ``"30m"``, or ``"off"`` (None: the runtime's, 10m on the shipped runtimes); its logs
            and diagnosis are kept
        :param grace_period: how long the ranks have to save a checkpoint and exit when the job is
            stopped (preempted, suspended, retried, ended): they get SIGTERM first, e.g. ``"5m"``
            (at most ``"1h"``; None: the runtime's, 60s on the shipped runtimes)
        :param service_account: a ServiceAccount of the namespace whose token the Launcher and every
            Worker get (None: none, no token in the ranks); you must be allowed to create its tokens
        :param register_model: register the job's model in the model registry when the job succeeds,
            ``"NAME[:VERSION]"`` (version: the job's name when left out), as :meth:`register_model`
            does (needs ``data_connection``; the cluster's administrator names the registry). A
            registration that fails leaves the job Succeeded, with a warning in its status that
            names the command that registers it later
        :param register_artifact: the model file to register when the job writes more than one
        :param dry_run: let the cluster check the job (admission and quota included) without creating it

        Raises :class:`InvalidJobError` naming the argument (before any API call for bad settings),
        :class:`QuotaExceededError`, :class:`PermissionDeniedError`.

        >>> client.create_job("train", ["mpirun", "python3", "train.py"], workers=4,
        ...                   runtime="mpi-openmpi-gpu", resources_per_worker={"nvidia.com/gpu": 8})
        """
        # A thin layer over submit_job: the parameters are JobSpec's fields by name (test_client
        # checks they stay the same list), and dry_run.
        spec = JobSpec(
            name=name, command=command, workers=workers, image=image, slots_per_worker=slots_per_worker,
            resources_per_worker=resources_per_worker, launcher_resources=launcher_resources, runtime=runtime, env=env,
            node_selector=node_selector, volumes=volumes, queue=queue, worker_image=worker_image,
            launcher_image=launcher_image, env_from_secret=env_from_secret, data_connection=data_connection, pvc=pvc,
            config_map=config_map, timeout=timeout, retries=retries, resume_from=resume_from, priority=priority,
            tolerations=tolerations, image_pull_secrets=image_pull_secrets, description=description,
            launcher_flags=launcher_flags, end_stuck_after=end_stuck_after, grace_period=grace_period,
            service_account=service_account, register_model=register_model, register_artifact=register_artifact,
        )
        return self.submit_job(spec, dry_run=dry_run)

    def submit_job(self, spec: JobSpec, dry_run: bool = False) -> MPIJob:
        """Create the MPI job ``spec`` describes: one typed :class:`JobSpec`, whose fields are
        :meth:`create_job`'s arguments by the same names. Build it once, keep it, change it with
        :func:`dataclasses.replace`, and pass it to a pipeline step as it is.

        >>> from mpijob import JobSpec
        >>> spec = JobSpec(name="train", command=["mpirun", "python3", "train.py"], workers=4,
        ...                data_connection="s3-data")
        >>> client.submit_job(spec)

        Raises what :meth:`create_job` raises, naming the field of a bad setting, and
        :class:`InvalidJobError` when ``spec`` is not a JobSpec.
        """
        if not isinstance(spec, JobSpec):
            hint = " (keyword arguments go to create_job)" if isinstance(spec, dict) else ""
            raise InvalidJobError(f"spec: a {type(spec).__name__} is not a JobSpec{hint}: "
                                  "build one with mpijob.JobSpec(name=..., command=[...], workers=N)", field="spec")
        return self._backend.create_job(spec, dry_run=dry_run)

    def get_progress(self, name: str) -> list[_progress.Report]:
        """Every progress report the job's ranks printed so far, oldest first, with the
        time each was logged (read from the Launcher's log; empty when none)."""
        return self._backend.get_progress(name=name)

    def get_stacks(self, name: str) -> Stacks:
        """Where each rank of running job ``name`` is now: every rank's Python stack, taken
        at once, identical ones grouped (``print(client.get_stacks("train"))``):
        ``ranks 0-6 (7): comm.Allreduce ← train.py:120 step()`` and
        ``rank 7 on Worker 1: comm.recv ← train.py:88 load_batch()``; ``contrast`` says it in
        a sentence. The same collector and grouping as ``kubectl mpijob stacks``.

        It runs a small collector in the job's pods (the right to create pods/exec), which
        signals each rank's process to write its stacks; the process keeps running. mpijob's
        images have the hook that answers (faulthandler on SIGUSR2), also while a rank is
        inside MPI, NCCL or another C extension; frames inside C code are not shown. A rank
        that is not Python, or runs without the hook, has its state only.

        Raises :class:`JobNotFoundError`, :class:`MPIJobError` for a job that has finished or
        has no running pod, :class:`PermissionDeniedError` without the right to exec.
        """
        return self._backend.get_stacks(name=name)

    def get_artifacts(self, name: str, download_dir: str | None = None, files: Sequence[str] | None = None,
                      overwrite: bool = False) -> list[dict[str, Any]]:
        """What job ``name`` wrote to its ``$MPIJOB_OUTPUT_URI``:
        ``[{"name": "model.npz", "size": 1234, "last_modified": datetime, "uri": ...}]``.
        With ``download_dir``, download them (or only ``files``) there; each gets a ``"path"``.
        A file already in ``download_dir`` is not replaced unless ``overwrite=True`` (nothing is
        downloaded then); a name that is hidden (``.git/config``), climbs out of the folder or
        has control or invisible characters is skipped (``"skipped"`` says why).

        On a data connection, the objects under ``s3://BUCKET/NAME/``: the connection's Secret
        is read as you, and boto3 is needed (``pip install 'mpijob[s3]'``). On a PVC (a job with
        ``pvc=`` and no data connection), the files under ``/mnt/CLAIM/NAME/``, read through a
        short-lived pod that you start (it mounts the claim read-only and is deleted when done;
        it needs the right to create pods and pods/exec).
        Raises :class:`InvalidJobError` when the job has neither or a file is not there,
        :class:`MPIJobError` naming the connection or claim when reading fails.
        """
        return self._backend.get_artifacts(name=name, download_dir=download_dir, files=files, overwrite=overwrite)

    def register_model(self, job: str, name: str, version: str | None = None, artifact: str | None = None,
                       registry: str | None = None, registry_url: str | None = None, registry_ca: str | None = None,
                       new_model: bool = False) -> Registration:
        """Register the model succeeded job ``job`` wrote to ``$MPIJOB_OUTPUT_URI`` as ``version``
        (default: the job's name) of model ``name`` in a Kubeflow Model Registry (OpenShift AI's),
        as ``kubectl mpijob register`` does: the model file's URI
        (``s3://BUCKET/KEY?endpoint=...&defaultRegion=...``), its format, the job's accuracy and loss,
        and where it came from (namespace, job, runtime, Workers, image, creator) as properties.

        The registry is reached as you, with your kubeconfig's token: at the address its Service
        names (``registry="NAMESPACE/SERVICE"``, default ``$MPIJOB_MODEL_REGISTRY`` or
        ``model-registry/model-registry``), or at ``registry_url`` (``registry_ca``: a private CA's
        PEM file). ``artifact`` picks the file when the job wrote more than one ``model.*``.
        A name close to a registered model's is refused as a likely typo unless ``new_model=True``.

        Registering the same job's model under the same version again changes nothing
        (``unchanged`` is True). Raises :class:`InvalidJobError` naming the field for bad input, a
        job that has not succeeded or a version another job registered (:class:`VersionTakenError`),
        :class:`PermissionDeniedError` when the registry refuses you, and
        :class:`RegistryUnreachableError` when it does not answer (the job is unchanged: call
        again later).
        """
        return self._backend.register_model(job=job, name=name, version=version, artifact=artifact, registry=registry,
                                            registry_url=registry_url, registry_ca=registry_ca, new_model=new_model)

    def get_job(self, name: str) -> MPIJob:
        """The job ``name`` with its status (phase, Launcher, Workers ready/total,
        reason, message, next step, times, creator) as mpijob-manager wrote it.

        Raises :class:`JobNotFoundError`, with a close name if there is one.
        """
        return self._backend.get_job(name=name)

    def list_jobs(self, runtime: str | None = None, phase: str | None = None, full: bool = False,
                  all_frameworks: bool = False) -> list[MPIJob]:
        """The namespace's MPI jobs, sorted by name, optionally only those on ``runtime`` or in
        ``phase``. Only MPI jobs, by the rule ``kubectl mpijob get`` and admission use
        (:mod:`mpijob.frameworks`); ``all_frameworks=True`` lists every TrainJob, each with its
        ``framework`` ("mpi", "torch", ...).

        The list reads the jobs' metadata and mpijob-manager's status, not their specs, as
        ``kubectl mpijob get`` does (at 10,000 jobs a fraction of the time): each job's ``raw``
        then holds its metadata only. ``full=True`` lists whole TrainJobs into ``raw``; so does
        the list when more than 20 jobs have no status from the manager yet.

        >>> [j.name for j in client.list_jobs(phase="Running")]
        """
        return self._backend.list_jobs(runtime=runtime, phase=phase, full=full, all_frameworks=all_frameworks)

    def list_runtimes(self) -> list[Runtime]:
        """The MPI runtimes of the cluster."""
        return self._backend.list_runtimes()

    def wait_for_job(self, name: str, phases: Iterable[str] = ("Succeeded",), timeout: float = 600,
                     poll_interval: float = 2) -> MPIJob:
        """Wait until the job is in one of ``phases``; returns it.

        Raises :class:`JobFailedError` (with the diagnosis in ``.status``) when it
        finishes in another phase or can never start (reason ``CannotStart`` or
        ``PodsRefused``), :class:`WaitTimeoutError` after ``timeout`` seconds.

        >>> client.wait_for_job("hello", phases=["Running"], timeout=120)
        """
        return self._backend.wait_for_job(name=name, phases=phases, timeout=timeout, poll_interval=poll_interval)

    def watch(self, name: str, timeout: float = 3600, events: bool = True) -> Iterator[LifecycleEvent]:
        """Yield the job's lifecycle as it happens until it finishes or ``timeout`` seconds pass:
        submitted, then each phase the manager reports (queued, scheduling, running, completed,
        failed) with its message, ``progress`` when the number of ready Workers changes or the
        ranks report training progress ("training 45% epoch 9/20 (accuracy 0.91, loss 0.31)"), and
        (``events=True``) each Kubernetes Event about the job's objects, as :meth:`get_events`.

        >>> for ev in client.watch("hello"):
        ...     print(ev.kind, ev.message)
        """
        return self._backend.watch(name=name, timeout=timeout, events=events)

    def get_events(self, name: str) -> list[JobEvent]:
        """The Kubernetes Events of the job's own objects (the TrainJob, its JobSet, Jobs, pods
        and Kueue Workload, matched by exact name: job ``hello`` never gets ``hello-4``'s),
        oldest first, as ``kubectl mpijob events`` shows them.

        >>> for e in client.get_events("hello"):
        ...     print(e.type, e.reason, e.message)
        """
        return self._backend.get_events(name=name)

    def get_logs(self, name: str, worker: int | str | None = None, follow: bool = False,
                 since: int | str | timedelta | None = None, until: datetime | None = None,
                 tail: int | None = None, grep: str | None = None, redact: bool = True,
                 rank: int | str | None = None, source: str = "auto") -> str | Iterator[str]:
        """Logs of the Launcher (``worker=None``), one Worker (an index) or all of them merged by
        time (``worker="all"``, each line prefixed ``[launcher]`` / ``[worker-N]``).

        ``rank`` keeps only what those ranks printed: ``2``, ``"0-3"`` or ``"0,2,5-7"``. mpirun
        forwards every rank's output to the Launcher, and the runtimes tag each line with its rank
        (``[1,RANK]<stdout>:TEXT`` on OpenMPI 4.1, ``[0,RANK]<stdio>:TEXT`` on MPICH and Intel MPI), so
        it goes with ``worker=None``.

        ``since`` is seconds, a timedelta or a duration such as ``"5m"`` or ``"1h30m"``; ``until``
        (a datetime) drops newer lines; ``grep`` is a regular
        expression; secrets are redacted as ``kubectl mpijob logs`` does. With ``follow=True``
        it returns an iterator of lines that ends when the pods stop.

        Where the cluster keeps a log store (``config/logstore``; the local cluster does), lines
        outlive the pods: ``source="auto"`` reads the store for a pod that is gone and for the lines
        the kubelet rotated out of a long log; ``"pods"`` or ``"store"`` reads only one of them.
        ``client.last_log_sources`` then says where each pod's lines came from (``"pod"``,
        ``"log store"`` or ``"log store, then pod"``). Reading the store takes the same right as
        reading the pods' logs.

        >>> print(client.get_logs("hello", worker="all", grep=r"rank \\d"))
        """
        return self._backend.get_logs(name=name, worker=worker, follow=follow, since=since, until=until, tail=tail, grep=grep, redact=redact, rank=rank, source=source)

    def delete_job(self, name: str, grace_period: int | None = None, wait: bool = True, timeout: float = 120) -> None:
        """Delete the job; with ``wait`` (default) return once its Launcher and Workers are gone.

        ``grace_period`` is the seconds the Launcher and Workers get to stop after SIGTERM
        (0: at once; None: each pod's own, 30 s by default), as ``kubectl mpijob delete --grace-period``.
        """
        return self._backend.delete_job(name=name, grace_period=grace_period, wait=wait, timeout=timeout)

    def suspend_job(self, name: str) -> str:
        """Suspend the job: its pods stop, and it keeps its place until :meth:`resume_job`. A job
        that Kueue manages is suspended through its Kueue Workload's ``spec.active`` (Kueue would set
        its ``spec.suspend`` back), any other job through ``spec.suspend``, as ``kubectl mpijob
        suspend`` and the dashboard do. Returns what was done, in words.

        >>> client.suspend_job("hello")
        'suspended (spec.suspend true)'
        """
        return self._backend.suspend_job(name=name)

    def resume_job(self, name: str) -> str:
        """Resume a suspended job (one that Kueue manages queues again for admission), as
        ``kubectl mpijob resume``. Returns what was done, in words."""
        return self._backend.resume_job(name=name)

    def clone_job(self, name: str, new_name: str, **overrides: Any) -> MPIJob:
        """Submit a copy of job ``name`` as ``new_name``, changed by ``overrides`` (the keyword
        arguments of :meth:`create_job`, the fields of :class:`JobSpec`: ``workers``, ``command``,
        ``image``, ``env``, ...; ``dry_run`` too). The copy keeps the original's data connections,
        PVCs and ConfigMaps (``CLONE_KEEPS``): an override of those, or an unknown one, raises
        :class:`InvalidJobError` naming it. The original is untouched.

        >>> client.clone_job("hello", "hello-4", workers=4)
        """
        return self._backend.clone_job(name=name, new_name=new_name, **overrides)

    def convert_legacy(self, manifest: str | dict[str, Any]) -> dict[str, Any]:
        """Convert a legacy ``kubeflow.org/v2beta1`` MPIJob (YAML text or dict) like
        ``kubectl mpijob convert``: returns ``{"trainJob": ..., "runtime": ... or None, "notes": [...]}``,
        each note ``{"field", "action" (mapped/changed/dropped), "detail"}``. ``runtime`` is the
        job's own namespaced TrainingRuntime (the legacy images and resources), to create before
        the TrainJob; volumes and scheduling are in the TrainJob's ``runtimePatches``. It converts
        against the shipped runtimes, as the CLI does, with no API call. Raises
        :class:`InvalidJobError` naming the bad field.
        """
        return self._backend.convert_legacy(manifest=manifest)
