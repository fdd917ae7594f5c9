"""mpijob.kfp: the Kubeflow Pipelines v2 components and the example pipeline
(examples/pipelines/digits_pipeline.py). Run with the kfp virtualenv (make kfp-venv):
the SDK's own virtualenv has no kfp, and skips this file."""

import dataclasses
import importlib.util
import json
import re
import uuid

import pytest

kfp = pytest.importorskip("kfp")

import contextlib  # noqa: E402

from kfp import compiler  # noqa: E402
from support import REPO  # noqa: E402

from mpijob import InvalidJobError, JobSpec, MPIJobClient  # noqa: E402
from mpijob.kfp import register_model, run_mpi_job, spec_input  # noqa: E402

PIPELINE = REPO / "examples" / "pipelines" / "digits_pipeline.py"
IR = REPO / "examples" / "pipelines" / "digits_pipeline.yaml"


def load_pipeline():
    spec = importlib.util.spec_from_file_location("digits_pipeline", PIPELINE)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_jobspec_goes_through_a_pipeline_parameter_unchanged():
    js = JobSpec(name="digits", command=["mpirun", "python3", "t.py"], workers=3, data_connection=["s3-a", "s3-b"],
                 resources_per_worker={"cpu": 2}, register_model="digits-classifier:v2", timeout="2h")
    d = spec_input(js)
    assert json.loads(json.dumps(d)) == d, "a pipeline parameter is JSON"
    assert JobSpec(**d) == js
    assert "image" not in d and "queue" not in d, "fields left at their defaults stay out"
    with pytest.raises(InvalidJobError, match="spec: a dict is not a JobSpec"):
        spec_input({"name": "digits"})


def test_the_components_take_and_give_what_the_docs_say():
    run = run_mpi_job.component_spec
    assert set(run.inputs) == {"spec", "namespace", "context", "kubeconfig", "timeout_seconds"}
    assert set(run.outputs) == {"job", "artifacts_uri", "model_uri", "metrics"}
    reg = register_model.component_spec
    assert {"job", "name", "version", "artifact", "namespace"} <= set(reg.inputs)
    assert set(reg.outputs) == {"Output"}


def test_the_example_pipeline_compiles_to_the_committed_ir(tmp_path):
    out = tmp_path / "p.yaml"
    compiler.Compiler().compile(load_pipeline().digits_pipeline, str(out))
    got = out.read_text()

    def body(text):  # the header's comment prints the spec's dict in an order protobuf does not fix
        return [line for line in text.splitlines() if not line.startswith("#")]

    assert body(got) == body(IR.read_text()), (f"{IR.relative_to(REPO)} is not what the pipeline compiles to: "
                                   f"python3 {PIPELINE.relative_to(REPO)} --compile {IR.relative_to(REPO)}")
    for step in ("run-mpi-job", "score-with-pytorch", "register-model"):
        assert f"comp-{step}" in got


TORCH_RUNTIME = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainingRuntime",
    "metadata": {"name": "torch-score", "labels": {"trainer.kubeflow.org/framework": "torch"}},
    "spec": {"mlPolicy": {"numNodes": 1, "torch": {}}, "template": {"spec": {"replicatedJobs": [{
        "name": "node", "template": {"metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}}, "spec": {"template": {"spec": {
            "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
            "automountServiceAccountToken": False,
            "containers": [{"name": "node", "image": "ghcr.io/mpijob/openmpi:4.1", "imagePullPolicy": "IfNotPresent",
                            "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
                            "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}]}}}}}]}}},
}


@pytest.mark.cluster
def test_the_pipeline_trains_scores_with_pytorch_and_registers(kubeconfig_path, tmp_path):
    """kfp.local's SubprocessRunner runs the example pipeline against the local cluster and its
    registry, as dev-a: the MPI job, a PyTorch TrainJob (a tenant's torch runtime, the OpenMPI
    image has torch) that scores the model, then the registration."""
    from kfp import local
    from kubernetes import client as k8s
    from kubernetes import config as k8s_config

    ns, ctx = "team-a", "dev-a"
    api = k8s_config.new_client_from_config(config_file=kubeconfig_path, context=ctx)
    crd, core = k8s.CustomObjectsApi(api), k8s.CoreV1Api(api)
    try:
        crd.create_namespaced_custom_object("trainer.kubeflow.org", "v1alpha1", ns, "trainingruntimes", TORCH_RUNTIME)
    except k8s.ApiException as e:
        if e.status != 409:
            raise
    job = "kfp-" + uuid.uuid4().hex[:6]
    model = "digits-kfp-" + uuid.uuid4().hex[:6]
    client = MPIJobClient(namespace=ns, context=ctx, config_file=kubeconfig_path)
    mod = load_pipeline()
    spec = dataclasses.replace(mod.TRAIN, name=job, command=[*mod.TRAIN.command, "--epochs", "10"])
    local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(tmp_path / "root"))
    try:
        mod.digits_pipeline(spec=spec_input(spec), namespace=ns, context=ctx, kubeconfig=kubeconfig_path, model_name=model,
                            version="v1", scoring_runtime="torch-score", scoring_runtime_kind="TrainingRuntime")
        j = client.get_job(job)
        assert j.status.phase == "Succeeded"
        # The PyTorch TrainJob's own word: its score, measured in torch, agrees with the
        # accuracy the MPI job measured on the same test split.
        pods = core.list_namespaced_pod(ns, label_selector=f"jobset.sigs.k8s.io/jobset-name={job}-score").items
        assert pods, "the scoring TrainJob left no pod"
        log = core.read_namespaced_pod_log(pods[0].metadata.name, ns)
        m = re.search(r"MPIJOB_SCORE accuracy=([0-9.]+) n=(\d+) torch=", log)
        assert m, log
        assert abs(float(m.group(1)) - j.progress.metrics["accuracy"]) <= 0.5 / int(m.group(2)) + 1e-6
        assert float(m.group(1)) >= 0.9
        # Registered, through the gateway as dev-a would read it.
        reg = client.register_model(job, model, version="v1")
        assert reg.unchanged and reg.uri.split("?")[0].endswith(f"/{job}/model.npz")
        # Read back with the Model Registry's own Python client (model-registry 0.3.14, the
        # server's version), through the gateway as dev-a, as OpenShift AI's users read it.
        from model_registry import ModelRegistry

        token = api.configuration.api_key["authorization"].removeprefix("Bearer ").strip()
        mr = ModelRegistry("http://10.244.0.1", 9468, author="dev-a", is_secure=False, user_token=token)
        art = mr.get_model_artifact(model, "v1")
        assert art is not None and art.uri == reg.uri and art.model_format_name == "numpy", art
        mv = mr.get_model_version(model, "v1")
        assert mv.custom_properties["mpijob.job"] == job and mv.custom_properties["mpijob.namespace"] == ns
        assert abs(mv.custom_properties["accuracy"] - j.progress.metrics["accuracy"]) < 1e-5
        assert mv.author == "dev-a"
    finally:
        with contextlib.suppress(Exception):
            client.delete_job(job, wait=False)
        with contextlib.suppress(k8s.ApiException):
            crd.delete_namespaced_custom_object("trainer.kubeflow.org", "v1alpha1", ns, "trainjobs", f"{job}-score")

