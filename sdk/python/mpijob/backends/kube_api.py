"""Every Kubernetes API call of the SDK, in one namespace (the Kubeflow SDK's
"backend"): the facade, :class:`mpijob.MPIJobClient`, checks arguments and
shapes results; this module talks to the API server and turns its errors into
the SDK's typed errors (:func:`mpijob.errors.from_api_exception`)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes import watch as k8s_watch
from kubernetes.client.rest import ApiException

from .. import jobspec as _jobspec
from ..constants import (
    GROUP,
    JOB_STATUS_GROUP,
    JOB_STATUS_PLURAL,
    JOB_STATUS_VERSION,
    JOBSET_NAME,
    LOG_STORE_GROUP_VERSION,
    MANAGER_LEASE_NAME,
    MANAGER_LEASE_NAMESPACE,
    STACKS_ANNOTATION,
    STATUS_ANNOTATION,
    VERSION,
)
from ..errors import InvalidJobError, JobNotFoundError, MPIJobError, WaitTimeoutError, from_api_exception
from ..logs import split_pods
from ..placement import warnings_of
from ..suggest import closest

# Kueue's Workloads (suspend and resume of a job Kueue manages), read and patched as the user.
KUEUE_GROUP, KUEUE_VERSION = "kueue.x-k8s.io", "v1beta2"


class KubernetesAPI:
    """The API calls of one namespace; ``custom`` and ``core`` are the official client's
    ``CustomObjectsApi`` and ``CoreV1Api`` (tests pass stand-ins)."""

    def __init__(self, namespace: str, custom: Any, core: Any, api: Any = None):
        self.namespace = namespace
        self._custom = custom
        self._core = core
        self._api = api

    @classmethod
    def from_kubeconfig(cls, namespace: str | None, context: str | None, config_file: str | None) -> KubernetesAPI:
        api_client, default_ns = load_config(context, config_file)
        return cls(namespace or default_ns or "default", k8s.CustomObjectsApi(api_client), k8s.CoreV1Api(api_client), api_client)

    def manager_lease(self) -> tuple[bool, dict[str, Any] | None]:
        """(readable, spec) of mpijob-manager's Lease; (True, None) when there is none.
        Unreadable (no API client, no permission) claims nothing."""
        if self._api is None:
            return False, None
        try:
            lease = k8s.CoordinationV1Api(self._api).read_namespaced_lease(MANAGER_LEASE_NAME, MANAGER_LEASE_NAMESPACE)
        except ApiException as e:
            return (e.status == 404), None
        except Exception:  # an unreachable server claims nothing here
            return False, None
        d = self._api.sanitize_for_serialization(lease)
        return True, (d.get("spec") or {}) if isinstance(d, dict) else {}

    @property
    def host(self) -> str:
        """The API server's address, for messages."""
        return str(getattr(getattr(self._api, "configuration", None), "host", "") or "the API server")

    # -- TrainJobs ------------------------------------------------------------

    # mpijob-manager's status of each job is its JobStatus (Go: pkg/jobstatus): every read of a
    # TrainJob here joins it into the job's mpijob.dev/status annotation, where JobStatus.from_trainjob
    # reads it. A cluster or a role that predates JobStatus (404, 403) leaves the annotation as it is.

    def _job_status(self, name: str) -> dict[str, Any] | None:
        try:
            obj: dict[str, Any] = self._custom.get_namespaced_custom_object(
                JOB_STATUS_GROUP, JOB_STATUS_VERSION, self.namespace, JOB_STATUS_PLURAL, name)
            return obj
        except ApiException as e:
            if e.status in (403, 404):
                return None
            raise from_api_exception(e, name) from None

    def _job_statuses(self) -> dict[str, dict[str, Any]]:
        try:
            items = self._custom.list_namespaced_custom_object(
                JOB_STATUS_GROUP, JOB_STATUS_VERSION, self.namespace, JOB_STATUS_PLURAL)["items"]
        except ApiException as e:
            if e.status in (403, 404):
                return {}
            raise from_api_exception(e) from None
        return {str((o.get("metadata") or {}).get("name")): o for o in items or []}

    def _joined(self, obj: dict[str, Any], name: str | None = None) -> dict[str, Any]:
        """``obj`` with its JobStatus joined (read now)."""
        n = name or (obj.get("metadata") or {}).get("name")
        if n:
            join_status(obj, self._job_status(str(n)))
        return obj

    def get_trainjob(self, name: str) -> dict[str, Any]:
        """The TrainJob ``name``; JobNotFoundError with a close name if there is one."""
        try:
            obj: dict[str, Any] = self._custom.get_namespaced_custom_object(GROUP, VERSION, self.namespace, "trainjobs", name)
            return self._joined(obj, name)
        except ApiException as e:
            if e.status != 404:
                raise from_api_exception(e, name) from None
        names: list[str] = []
        with contextlib.suppress(ApiException, MPIJobError):
            metas = self.list_trainjob_metadata()  # names alone: no spec needed
            names = [o["metadata"]["name"] for o in (self.list_trainjobs() if metas is None else metas)]
        close = closest(name, names)
        msg = f"MPI job {name!r} not found in namespace {self.namespace}"
        if close:
            msg += f": did you mean {close!r}?"
        raise JobNotFoundError(msg, name=name, suggestion=close or None)

    def trainjob_exists(self, name: str) -> bool:
        return self.read_trainjob(name) is not None

    def list_trainjobs(self) -> list[dict[str, Any]]:
        try:
            items: list[dict[str, Any]] = self._custom.list_namespaced_custom_object(GROUP, VERSION, self.namespace, "trainjobs")["items"]
        except ApiException as e:
            raise from_api_exception(e) from None
        if items:
            statuses = self._job_statuses()
            for o in items:
                join_status(o, statuses.get(str((o.get("metadata") or {}).get("name"))))
        return items

    def list_trainjob_metadata(self) -> list[dict[str, Any]] | None:
        """The namespace's TrainJobs, metadata only (``PartialObjectMetadataList``: names, labels
        and annotations, mpijob-manager's status among them), as ``kubectl mpijob get`` lists them:
        at 10,000 jobs a fraction of the whole jobs' bytes and of the API server's time. None
        without an API client (tests' stand-ins)."""
        if self._api is None:
            return None
        try:
            out = self._api.call_api(
                "/apis/{group}/{version}/namespaces/{namespace}/trainjobs", "GET",
                path_params={"group": GROUP, "version": VERSION, "namespace": self.namespace}, query_params=[],
                # An API server that cannot answer metadata only sends whole jobs, which serve too.
                header_params={"Accept": "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"},
                response_type="object", auth_settings=["BearerToken"], _return_http_data_only=True)
        except ApiException as e:
            raise from_api_exception(e) from None
        items: list[dict[str, Any]] = (out or {}).get("items") or []
        if items:
            statuses = self._job_statuses()
            for o in items:
                join_status(o, statuses.get(str((o.get("metadata") or {}).get("name"))))
        return items

    def read_trainjob(self, name: str) -> dict[str, Any] | None:
        """The TrainJob ``name``, None when there is none (deleted since a list)."""
        try:
            obj: dict[str, Any] = self._custom.get_namespaced_custom_object(GROUP, VERSION, self.namespace, "trainjobs", name)
        except ApiException as e:
            if e.status == 404:
                return None
            raise from_api_exception(e, name) from None
        return self._joined(obj, name)

    def create_trainjob(self, body: dict[str, Any], dry_run: bool, retry: bool) -> tuple[dict[str, Any], list[str]]:
        """Create the TrainJob, trying again for up to 10 s while a webhook cannot be reached and,
        right after its runtime (``retry``), while Trainer's or Kueue's webhook has not seen that
        runtime yet (their caches lag).
        Returns the created object and the API server's warnings (admission's included)."""
        kwargs = {"dry_run": "All"} if dry_run else {}
        deadline = time.monotonic() + 10
        delay = 0.1
        while True:
            try:
                created, _, headers = self._custom.create_namespaced_custom_object_with_http_info(
                    GROUP, VERSION, self.namespace, "trainjobs", body, **kwargs)
                return created, warnings_of(headers)
            except ApiException as e:
                if not (_jobspec.try_again(e.body or e.reason or "", retry) and time.monotonic() < deadline):
                    raise from_api_exception(e, body["metadata"]["name"]) from None
            time.sleep(delay)
            delay = min(delay * 1.5, 1.0)

    def delete_trainjob(self, name: str, grace_period: int | None) -> None:
        body = k8s.V1DeleteOptions(propagation_policy="Foreground", grace_period_seconds=grace_period)
        try:
            self._custom.delete_namespaced_custom_object(GROUP, VERSION, self.namespace, "trainjobs", name, body=body)
        except ApiException as e:
            if e.status == 404:
                self.get_trainjob(name)  # a "did you mean" error
            raise from_api_exception(e, name) from None

    def patch_trainjob_suspend(self, name: str, suspend: bool) -> dict[str, Any]:
        """Set the TrainJob's spec.suspend (a merge patch, as the user)."""
        try:
            obj: dict[str, Any] = self._custom.patch_namespaced_custom_object(
                GROUP, VERSION, self.namespace, "trainjobs", name, {"spec": {"suspend": suspend}})
            return obj
        except ApiException as e:
            raise from_api_exception(e, name) from None

    def set_workload_active(self, job_uid: str, active: bool) -> str | None:
        """Set spec.active of the Kueue Workload of the job with ``job_uid`` (as the user: mpijob-edit
        grants the patch, mpijob's admission lets people change that field only); its name, or None
        when Kueue has not made it yet. Go: queue.SetActive."""
        try:
            items = self._custom.list_namespaced_custom_object(
                KUEUE_GROUP, KUEUE_VERSION, self.namespace, "workloads", label_selector=f"kueue.x-k8s.io/job-uid={job_uid}")["items"]
            if not items:
                return None
            wl = str(items[0]["metadata"]["name"])
            self._custom.patch_namespaced_custom_object(KUEUE_GROUP, KUEUE_VERSION, self.namespace, "workloads", wl,
                                                        {"spec": {"active": active}})
            return wl
        except ApiException as e:
            raise from_api_exception(e) from None

    def watch_trainjob(self, name: str, timeout_seconds: int) -> Iterator[tuple[str, dict[str, Any]]]:
        """(event type, TrainJob) as they happen, for up to ``timeout_seconds``, each with its
        JobStatus joined. A change of the JobStatus alone is no TrainJob event: a caller that
        watches again after the timeout (its first event is the job as it is) sees it then."""
        w = k8s_watch.Watch()
        try:
            for ev in w.stream(self._custom.list_namespaced_custom_object, GROUP, VERSION, self.namespace, "trainjobs",
                               field_selector=f"metadata.name={name}", timeout_seconds=timeout_seconds):
                obj = ev["object"]
                if ev["type"] != "DELETED" and isinstance(obj, dict):
                    self._joined(obj, name)
                yield ev["type"], obj
        except ApiException as e:
            raise from_api_exception(e, name) from None
        finally:
            w.stop()

    # -- runtimes --------------------------------------------------------------

    def base_runtime(self, name: str, kind: str = "") -> dict[str, Any]:
        """The MPI runtime a job here picks by ``name`` (mirror of Go's ``runtimes.FindBase``): the
        ClusterTrainingRuntime of that name, else the namespace's own TrainingRuntime (not another
        job's per-job runtime); only the latter when ``kind`` is "TrainingRuntime". InvalidJobError
        (field ``runtime``) naming a close one when there is none, or when it is not an MPI runtime."""
        rt: dict[str, Any] | None = None
        if kind != "TrainingRuntime":
            try:
                rt = self._custom.get_cluster_custom_object(GROUP, VERSION, "clustertrainingruntimes", name)
            except ApiException as e:
                if e.status != 404:
                    raise from_api_exception(e) from None
        if rt is None:
            try:
                own: dict[str, Any] = self._custom.get_namespaced_custom_object(GROUP, VERSION, self.namespace, "trainingruntimes", name)
                if not _jobspec.is_derived((own.get("metadata") or {}).get("labels")):
                    rt = own
            except ApiException as e:
                if e.status not in (403, 404):
                    raise from_api_exception(e) from None
        if rt is None:
            names = []
            with contextlib.suppress(MPIJobError):
                names = [r["metadata"]["name"] for r in self.list_base_runtimes()]
            close = closest(name, names)
            hint = f": did you mean {close!r}?" if close else (f": MPI runtimes are {', '.join(names)}" if names else "")
            raise InvalidJobError(f"runtime {name!r} does not exist{hint}", field="runtime")
        if not _has_mpi_policy(rt):
            raise InvalidJobError(f"runtime {name!r} is not an MPI runtime (it has no MPI policy)", field="runtime")
        return rt

    def list_base_runtimes(self) -> list[dict[str, Any]]:
        """The MPI runtimes a job here may pick (mirror of Go's ``runtimes.ListBases``): the
        cluster's, then the namespace's own (not per-job runtimes), each sorted by name."""
        cluster = sorted((r for r in self.list_cluster_runtimes() if _has_mpi_policy(r)), key=lambda r: r["metadata"]["name"])
        own = sorted((r for r in self.list_namespaced_runtimes() if _has_mpi_policy(r) and not _jobspec.is_derived((r.get("metadata") or {}).get("labels"))),
                     key=lambda r: r["metadata"]["name"])
        return cluster + own

    def list_cluster_runtimes(self) -> list[dict[str, Any]]:
        try:
            items: list[dict[str, Any]] = self._custom.list_cluster_custom_object(GROUP, VERSION, "clustertrainingruntimes")["items"]
            return items
        except ApiException as e:
            raise from_api_exception(e) from None

    def list_namespaced_runtimes(self) -> list[dict[str, Any]]:
        """The namespace's TrainingRuntimes; none when the user may not list them."""
        try:
            items: list[dict[str, Any]] = self._custom.list_namespaced_custom_object(GROUP, VERSION, self.namespace, "trainingruntimes")["items"]
            return items
        except ApiException as e:
            if e.status in (401, 403, 404):
                return []
            raise from_api_exception(e) from None

    def job_runtime(self, name: str) -> dict[str, Any]:
        """A job's own namespaced TrainingRuntime."""
        try:
            rt: dict[str, Any] = self._custom.get_namespaced_custom_object(GROUP, VERSION, self.namespace, "trainingruntimes", name)
            return rt
        except ApiException as e:
            raise from_api_exception(e, name) from None

    def create_job_runtime(self, rt: dict[str, Any]) -> None:
        """Create a job's own runtime; one left by an earlier job of the same name that is
        gone is replaced, anything else of that name is refused."""
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
            try:
                old = self.job_runtime(name)
            except JobNotFoundError:
                continue  # it went between the two calls (an earlier dry run's, just deleted): create again
            if ((old.get("metadata") or {}).get("labels") or {}).get(_jobspec.JOB_LABEL) != name:
                raise InvalidJobError(f"a TrainingRuntime named {name} already exists in namespace {self.namespace} and is not "
                                      "this job's: give the job another name", field="name")
            if self.trainjob_exists(name):
                raise InvalidJobError(f"job {name} already exists in namespace {self.namespace}: pick another name or delete it first", field="name")
            # A runtime left by an earlier job of this name that is gone: replace it.
            self.delete_job_runtime(name)
            if time.monotonic() > deadline:
                raise WaitTimeoutError(f"the runtime {name} of an earlier job of this name is still being deleted; try again in a minute")
            time.sleep(0.5)

    def delete_job_runtime(self, name: str) -> None:
        with contextlib.suppress(ApiException):
            self._custom.delete_namespaced_custom_object(GROUP, VERSION, self.namespace, "trainingruntimes", name)

    def give_runtime_to(self, name: str, owner: dict[str, Any]) -> None:
        """Make the TrainJob ``owner`` own its runtime; on failure mpijob-manager does it."""
        with contextlib.suppress(ApiException):
            self._custom.patch_namespaced_custom_object(
                GROUP, VERSION, self.namespace, "trainingruntimes", name,
                {"metadata": {"ownerReferences": [_jobspec.owner_reference(owner)]}})

    # -- data connections and PVCs ----------------------------------------------

    def service_annotations(self, namespace: str, name: str) -> dict[str, str] | None:
        """A Service's annotations (None when there is no such Service); read as the user."""
        try:
            svc = self._core.read_namespaced_service(name, namespace)
        except ApiException as e:
            if e.status == 404:
                return None
            raise from_api_exception(e, name) from None
        return dict(svc.metadata.annotations or {})

    def bearer_token(self) -> str:
        """The kubeconfig's (or the pod's) bearer token, "" when it has none."""
        cfg = getattr(self._api, "configuration", None)
        if cfg is None:
            return ""
        if getattr(cfg, "refresh_api_key_hook", None) is not None:
            cfg.refresh_api_key_hook(cfg)
        auth = (getattr(cfg, "api_key", None) or {}).get("authorization", "") or ""
        return auth[len("Bearer "):] if auth.startswith("Bearer ") else ""

    def whoami(self) -> str:
        """The caller's user name, as the API server knows it ("" when it will not say)."""
        try:
            r = k8s.AuthenticationV1Api(self._api).create_self_subject_review({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
            return str(r.status.user_info.username or "")
        except Exception:
            return ""

    def get_secret(self, name: str) -> dict[str, Any] | None:
        """A Secret with its data decoded (None when there is none); read as the user."""
        import base64

        try:
            s = self._core.read_namespaced_secret(name, self.namespace)
        except ApiException as e:
            if e.status == 404:
                return None
            raise from_api_exception(e, name) from None
        data = {k: base64.b64decode(v).decode("utf-8", "replace") for k, v in (s.data or {}).items()}
        return {"metadata": {"name": name, "labels": s.metadata.labels or {}, "annotations": s.metadata.annotations or {}}, "data": data}

    def list_connections(self) -> list[str]:
        """The namespace's S3 data connections, by name."""
        from .. import dataconn

        try:
            items = self._core.list_namespaced_secret(self.namespace, label_selector=f"{dataconn.DASHBOARD_LABEL}=true").items
        except ApiException:
            return []
        return sorted(s.metadata.name for s in items
                      if dataconn.is_connection(s.metadata.labels or {}, s.metadata.annotations or {})
                      and dataconn.type_of(s.metadata.annotations or {}) == dataconn.TYPE_S3)

    def pvc_exists(self, name: str) -> bool:
        return self._exists(self._core.read_namespaced_persistent_volume_claim, name)

    def config_map_exists(self, name: str) -> bool:
        return self._exists(self._core.read_namespaced_config_map, name)

    def _exists(self, read: Any, name: str) -> bool:
        try:
            read(name, self.namespace)
            return True
        except ApiException as e:
            if e.status == 404:
                return False
            if e.status == 403:
                return True  # reading claims or ConfigMaps is not needed to use one: the pods will say
            raise from_api_exception(e, name) from None

    # -- a PVC's reader pod ------------------------------------------------------

    def create_pod(self, body: dict[str, Any]) -> str:
        """Create a pod as the user; its name."""
        try:
            pod = self._core.create_namespaced_pod(self.namespace, body)
        except ApiException as e:
            raise from_api_exception(e, body["metadata"].get("generateName", "")) from None
        name: str = pod.metadata.name
        return name

    def pod_state(self, pod: str) -> tuple[str, str]:
        """The pod's phase, and why it waits when it is Pending."""
        try:
            p = self._core.read_namespaced_pod(pod, self.namespace)
        except ApiException as e:
            raise from_api_exception(e, pod) from None
        why = "Pending"
        for cs in p.status.container_statuses or []:
            w = cs.state.waiting if cs.state else None
            if w is not None and w.reason and w.reason != "ContainerCreating":
                return p.status.phase, f"{w.reason}: {w.message or ''}".strip()
        for c in p.status.conditions or []:
            if c.type == "PodScheduled" and c.status == "False":
                why = f"{c.reason}: {c.message or ''}".strip()
        return p.status.phase, why

    def delete_pod(self, pod: str) -> None:
        with contextlib.suppress(ApiException):
            self._core.delete_namespaced_pod(pod, self.namespace, grace_period_seconds=0)

    def exec_pod(self, pod: str, container: str, command: list[str]) -> Iterator[str]:
        """Run ``command`` in the pod, yielding its stdout as it comes; a non-zero exit
        raises :class:`MPIJobError` with its stderr. Safe from several threads at once: the
        client's ``stream`` swaps its API client's request method while it runs, so each exec
        gets an API client of its own."""
        from kubernetes.stream import stream

        core = self._core
        api_client = getattr(core, "api_client", None)
        if isinstance(api_client, k8s.ApiClient):
            core = k8s.CoreV1Api(k8s.ApiClient(api_client.configuration))
        try:
            resp = stream(core.connect_get_namespaced_pod_exec, pod, self.namespace, container=container,
                          command=command, stderr=True, stdin=False, stdout=True, tty=False, _preload_content=False)
        except ApiException as e:
            raise from_api_exception(e, pod) from None
        err: list[str] = []
        try:
            while resp.is_open():
                resp.update(timeout=1)
                if resp.peek_stdout():
                    yield resp.read_stdout()
                if resp.peek_stderr():
                    err.append(resp.read_stderr())
            if resp.returncode:
                raise MPIJobError(f"{' '.join(command[:2])} in pod {pod} failed: {''.join(err).strip()}")
        finally:
            resp.close()

    # -- pods, logs, events ------------------------------------------------------

    def job_pods(self, name: str) -> tuple[list[Any], list[Any]]:
        """The job's Launcher pods (newest first) and Worker pods (by index), as the user lists them."""
        try:
            pods = self._core.list_namespaced_pod(self.namespace, label_selector=f"{JOBSET_NAME}={name}").items
        except ApiException as e:
            raise from_api_exception(e, name) from None
        # Sorted as the CLI and the dashboard sort them (logs.split_pods, Go's jobpods.Split).
        return split_pods(pods)

    def delete_job_pods(self, name: str, grace_period: int) -> None:
        try:
            self._core.delete_collection_namespaced_pod(self.namespace, label_selector=f"{JOBSET_NAME}={name}",
                                                        grace_period_seconds=grace_period)
        except ApiException as e:
            if e.status != 404:
                raise from_api_exception(e, name) from None

    def pod_log(self, pod: str, **kwargs: Any) -> str | None:
        """The pod's log (None when the pod is gone)."""
        try:
            text: str = self._core.read_namespaced_pod_log(pod, self.namespace, **kwargs)
            return text
        except ApiException as e:
            if e.status == 404:
                return None
            raise from_api_exception(e) from None

    # -- the log store (logs.mpijob.dev, served by mpijob-manager) -------------

    def log_store_available(self) -> bool:
        """Whether the cluster serves the log store's read API (config/logstore)."""
        if self._api is None:
            return False
        try:
            _, status, _ = self._api.call_api(f"/apis/{LOG_STORE_GROUP_VERSION}", "GET", auth_settings=["BearerToken"],
                                              _preload_content=False, _request_timeout=10)
        except ApiException:
            return False
        return bool(200 <= status < 300)

    def stored_log(self, job: str, role: str, index: int | None = None, since_seconds: int | None = None,
                   end: str | None = None) -> str:
        """A job's lines of one role (and Worker index) kept in the log store, "TIME TEXT" per
        line in time order, read as the user; ``end`` (RFC 3339) bounds them, exclusive."""
        query: list[tuple[str, Any]] = [("role", role)]
        if index is not None and role == "worker":
            query.append(("index", str(index)))
        if since_seconds:
            query.append(("sinceSeconds", str(since_seconds)))
        if end:
            query.append(("end", end))
        path = f"/apis/{LOG_STORE_GROUP_VERSION}/namespaces/{self.namespace}/trainjobs/{job}/log"
        try:
            resp = self._api.call_api(path, "GET", query_params=query, auth_settings=["BearerToken"],
                                      _preload_content=False, _return_http_data_only=True)
        except ApiException as e:
            raise from_api_exception(e, job) from None
        return str(resp.data.decode("utf-8", "replace"))

    def stream_pod_log(self, pod: str, **kwargs: Any) -> Iterator[str]:
        """The pod's log lines as they come, until its container stops."""
        try:
            resp = self._core.read_namespaced_pod_log(pod, self.namespace, follow=True, _preload_content=False, **kwargs)
        except ApiException as e:
            raise from_api_exception(e) from None
        for raw in resp.stream():
            yield from raw.decode("utf-8", "replace").splitlines()

    def pod_phase(self, pod: str) -> str | None:
        """The pod's phase (None when it is gone)."""
        try:
            phase: str = self._core.read_namespaced_pod(pod, self.namespace).status.phase
            return phase
        except ApiException as e:
            if e.status == 404:
                return None
            raise from_api_exception(e) from None

    def list_events(self) -> list[Any]:
        try:
            return list(self._core.list_namespaced_event(self.namespace).items)
        except ApiException as e:
            raise from_api_exception(e) from None


def load_config(context: str | None, config_file: str | None) -> tuple[Any, str | None]:
    """An API client from the kubeconfig (or the pod's ServiceAccount), and its namespace."""
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


def _has_mpi_policy(rt: dict[str, Any]) -> bool:
    """Whether a runtime (as a dict) has an MPI ML policy: what base_runtime and list_base_runtimes pick.

    An empty policy (``mpi: {}``) is one, as for Trainer and mpijob-manager (``runtimes.IsMPI``: the
    policy is set, whatever it holds).
    """
    return ((rt.get("spec") or {}).get("mlPolicy") or {}).get("mpi") is not None


def join_status(obj: dict[str, Any], js: dict[str, Any] | None) -> bool:
    """Put JobStatus ``js``'s status into TrainJob ``obj``'s mpijob.dev/status annotation, and its
    stacks into mpijob.dev/stacks, when ``js`` is that job's own (its owner's UID is the job's: a job
    made again under the name has a new UID) and holds one of them. Go: api.JoinStatus; both run the
    vectors of pkg/api/testdata/join-status.json."""
    if not js or js.get("kind") not in (None, "JobStatus"):
        return False
    joined = {a: js[k] for k, a in (("status", STATUS_ANNOTATION), ("stacks", STACKS_ANNOTATION))
              if isinstance(js.get(k), str) and js[k]}
    if not joined:
        return False
    meta = obj.setdefault("metadata", {})
    uid = meta.get("uid")
    owners = (js.get("metadata") or {}).get("ownerReferences") or []
    if not uid or not any(o.get("uid") == uid and o.get("kind") == "TrainJob" for o in owners):
        return False
    meta["annotations"] = {**(meta.get("annotations") or {}), **joined}
    return True
