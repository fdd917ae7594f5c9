"""What several unit-test files share: the repository, stand-ins of the official client's APIs, objects."""

import importlib.util
import json
import pathlib
import sys

import yaml

from mpijob import (
    MPIJobClient,
)

REPO = pathlib.Path(__file__).resolve().parents[3]


def load_example(name):
    """examples/training/NAME.py as a module, loaded as its job runs it: its folder on
    sys.path (for mpijob_io) while it loads."""
    folder = str(REPO / "examples/training")
    sys.path.insert(0, folder)
    try:
        spec = importlib.util.spec_from_file_location(name, REPO / "examples/training" / f"{name}.py")
        assert spec and spec.loader
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path.remove(folder)


RUNTIME_NOT_SEEN = json.loads((REPO / "pkg/jobspec/testdata/runtime-not-seen.json").read_text())["vectors"]


class _FlakyCustom:
    """CustomObjectsApi stand-in: Trainer's webhook refuses the TrainJob `refusals` times
    because its cache has not seen the job's runtime yet; records every call."""

    def __init__(self, refusals, other=None):
        self.refusals, self.other, self.calls = refusals, other, []

    def create_namespaced_custom_object(self, group, version, namespace, plural, body, **kwargs):
        from kubernetes.client.rest import ApiException
        self.calls.append(plural)
        if plural == "trainjobs":
            if self.other is not None:
                e = ApiException(status=422, reason="Unprocessable Entity")
                e.body = self.other
                raise e
            if self.refusals > 0:
                self.refusals -= 1
                e = ApiException(status=403, reason="Forbidden")
                e.body = RUNTIME_NOT_SEEN[0]["error"]
                raise e
            return {**body, "metadata": {**body["metadata"], "uid": "u1"}}
        return body

    def create_namespaced_custom_object_with_http_info(self, group, version, namespace, plural, body, **kwargs):
        """As the official client's: (object, status, headers); a dry run is answered with
        admission's placement warnings, as mpijob's webhook sends them."""
        from urllib3 import HTTPHeaderDict
        obj = self.create_namespaced_custom_object(group, version, namespace, plural, body, **kwargs)
        headers = HTTPHeaderDict()
        if kwargs.get("dry_run") == "All":
            headers.add("Warning", '299 - "Placement: fits now: the Launcher and 2 Workers (each 1 cpu) fit in what the nodes have free."')
            headers.add("Warning", '299 - "spec.trainer: no memory limit, \\"quoted\\""')
            headers.add("Warning", '299 - "Placement: Kueue queue team-a/default (ClusterQueue team-a): no job waits ahead of this one."')
        return obj, 201, headers

    def patch_namespaced_custom_object(self, *args):
        self.calls.append("patch " + args[3])

    def delete_namespaced_custom_object(self, *args, **kwargs):
        self.calls.append("delete " + args[3])


def _offline_client(custom, core=None):
    """A client whose Kubernetes backend talks to stand-ins of the official client's APIs."""
    from mpijob.backends import KubernetesAPI, KubernetesBackend
    return MPIJobClient(backend=KubernetesBackend(KubernetesAPI("team-a", custom, core)))


class _RecordingCustom(_FlakyCustom):
    """Serves the shipped runtimes and records the created objects."""

    def __init__(self):
        super().__init__(refusals=0)
        self.created = {}

    def list_namespaced_custom_object(self, *args, **kwargs):
        raise AssertionError("watched through the Watch stand-in only")

    def get_namespaced_custom_object(self, group, version, namespace, plural, name):
        # The watched job as it is now, with no status written yet; and each job's JobStatus, read
        # beside it: these jobs carry their status in the annotation, as an older manager wrote it,
        # and have none.
        from kubernetes.client.rest import ApiException
        if plural == "trainjobs":
            return _trainjob(None)
        raise ApiException(status=404, reason="Not Found")

    def get_cluster_custom_object(self, group, version, plural, name):
        return yaml.safe_load((REPO / "config" / "runtimes" / f"{name}.yaml").read_text())

    def create_namespaced_custom_object(self, group, version, namespace, plural, body, **kwargs):
        self.created[plural] = body
        return super().create_namespaced_custom_object(group, version, namespace, plural, body, **kwargs)


def _trainjob(status):
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": "hello", "namespace": "team-a", "annotations": {"mpijob.dev/status": json.dumps(status)} if status else {}},
            "spec": {"runtimeRef": {"name": "mpi-openmpi", "kind": "ClusterTrainingRuntime"}, "trainer": {"numNodes": 2}}}
