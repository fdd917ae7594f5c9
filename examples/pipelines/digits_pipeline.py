"""An MPI job as a step of a Kubeflow Pipelines v2 pipeline: MPI training, then a
PyTorch TrainJob that scores the model on the held-out digits, then the model
registered in the Model Registry (seed 002: MPIJob → PyTorchJob → Model Registry).

    python3 digits_pipeline.py --compile digits_pipeline.yaml   # the IR YAML a KFP backend runs
    python3 digits_pipeline.py --local --namespace team-a --context dev-a   # kfp.local, against your cluster

The training step takes the job as one typed :class:`mpijob.JobSpec` (a pipeline
parameter: ``spec_input(JobSpec(...))``). The scoring step creates a TrainJob on
a PyTorch runtime (``scoring_runtime``: Trainer's ``torch-distributed`` by
default, or a TrainingRuntime of your namespace) that loads the model with
torch, scores it, and prints ``MPIJOB_SCORE accuracy=...``; the step fails below
``min_accuracy``, so a worse model is never registered. docs/training.md,
"Pipelines", says what runs where.
"""

import argparse
import sys

from kfp import compiler, dsl

from mpijob import JobSpec
from mpijob.kfp import BASE_IMAGE, PACKAGES, register_model, run_mpi_job, spec_input

#: The MPI training job: the digits example on the data connection, 30 epochs.
TRAIN = JobSpec(
    name="digits-kfp", workers=2, slots_per_worker=1, data_connection="local-s3",
    command=["mpirun", "python3", "/opt/mpijob/examples/digits_mpi4py.py",
             "--data", "s3://$(AWS_S3_BUCKET)/datasets/digits/digits.csv.gz", "--output", "from-env"],
)

#: What the PyTorch TrainJob runs: the model and the test split from the training
#: job's artifacts, the data from the connection, the forward pass in torch.
SCORE = r"""
import gzip, io, json, os, urllib.parse
import boto3, numpy as np, torch
s3 = boto3.client("s3", endpoint_url=os.environ["AWS_S3_ENDPOINT"], region_name=os.environ.get("AWS_DEFAULT_REGION") or "us-east-1")
def get(uri):
    u = urllib.parse.urlparse(uri)
    return s3.get_object(Bucket=u.netloc, Key=u.path.lstrip("/"))["Body"].read()
model = np.load(io.BytesIO(get(os.environ["MODEL_URI"])))
metrics = json.loads(get(os.environ["ARTIFACTS_URI"] + "metrics.json"))
raw = gzip.decompress(s3.get_object(Bucket=os.environ["AWS_S3_BUCKET"], Key="datasets/digits/digits.csv.gz")["Body"].read())
table = np.loadtxt(io.BytesIO(raw), delimiter=",")
test = np.array(metrics["test_indices"])
x = torch.tensor(table[test, :64] / 16.0)
y = torch.tensor(table[test, 64].astype(int))
w = {k: torch.tensor(model[k], dtype=torch.float64) for k in ("w1", "b1", "w2", "b2")}
logits = torch.relu(x @ w["w1"] + w["b1"]) @ w["w2"] + w["b2"]
accuracy = (logits.argmax(dim=1) == y).double().mean().item()
print(f"MPIJOB_SCORE accuracy={accuracy:.6f} n={len(test)} torch={torch.__version__}", flush=True)
"""


@dsl.component(base_image=BASE_IMAGE, packages_to_install=PACKAGES)
def score_with_pytorch(job: str, model_uri: str, artifacts_uri: str, script: str, data_connection: str, namespace: str = "",
                       runtime: str = "torch-distributed", runtime_kind: str = "ClusterTrainingRuntime", image: str = "",
                       min_accuracy: float = 0.9, context: str = "", kubeconfig: str = "", timeout_seconds: int = 900) -> float:
    """Score MPI job ``job``'s model in a PyTorch TrainJob (``JOB-score``, on ``runtime``) and
    return its accuracy; fail below ``min_accuracy``."""
    import pathlib
    import re
    import time

    from kubernetes import client as k8s
    from kubernetes import config as k8s_config

    if not model_uri:
        raise RuntimeError(f"MPI job {job} wrote no model file to score")
    if kubeconfig or context:
        api = k8s_config.new_client_from_config(config_file=kubeconfig or None, context=context or None)
        namespace = namespace or k8s_config.list_kube_config_contexts(config_file=kubeconfig or None)[1]["context"].get("namespace", "default")
    else:
        k8s_config.load_incluster_config()
        api = k8s.ApiClient()
        namespace = namespace or pathlib.Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace").read_text().strip()
    crd, core = k8s.CustomObjectsApi(api), k8s.CoreV1Api(api)
    name = f"{job}-score"[:40]
    secret = {"name": data_connection}
    env = [{"name": k, "valueFrom": {"secretKeyRef": {**secret, "key": k, "optional": k == "AWS_DEFAULT_REGION"}}}
           for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_S3_ENDPOINT", "AWS_S3_BUCKET", "AWS_DEFAULT_REGION")]
    env += [{"name": "MODEL_URI", "value": model_uri}, {"name": "ARTIFACTS_URI", "value": artifacts_uri}]
    trainer = {"numNodes": 1, "command": ["python3", "-c", script], "env": env}
    if image:
        trainer["image"] = image
    body = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": name, "namespace": namespace},
            "spec": {"runtimeRef": {"apiGroup": "trainer.kubeflow.org", "kind": runtime_kind, "name": runtime}, "trainer": trainer}}
    try:
        crd.create_namespaced_custom_object("trainer.kubeflow.org", "v1alpha1", namespace, "trainjobs", body)
        print(f"created PyTorch TrainJob {name} on {runtime_kind} {runtime}", flush=True)
    except k8s.ApiException as e:
        if e.status != 409:
            raise
        print(f"PyTorch TrainJob {name} exists: reading its score", flush=True)
    deadline, score, state = time.monotonic() + timeout_seconds, None, ""
    while time.monotonic() < deadline and score is None:
        tj = crd.get_namespaced_custom_object("trainer.kubeflow.org", "v1alpha1", namespace, "trainjobs", name)
        conds = {c["type"]: c for c in (tj.get("status") or {}).get("conditions") or [] if c.get("status") == "True"}
        if "Failed" in conds:
            raise RuntimeError(f"PyTorch TrainJob {name} failed: {conds['Failed'].get('message', '')}")
        for pod in core.list_namespaced_pod(namespace, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}").items:
            state = pod.status.phase
            if state in ("Running", "Succeeded", "Failed"):
                m = re.search(r"MPIJOB_SCORE accuracy=([0-9.]+)", core.read_namespaced_pod_log(pod.metadata.name, namespace))
                if m:
                    score = float(m.group(1))
        time.sleep(2)
    if score is None:
        raise TimeoutError(f"PyTorch TrainJob {name} printed no score within {timeout_seconds}s (its pod: {state or 'none yet'})")
    print(f"PyTorch TrainJob {name}: accuracy {score:.4f}", flush=True)
    if score < min_accuracy:
        raise RuntimeError(f"the model of MPI job {job} scores {score:.4f}, below min_accuracy {min_accuracy}: it is not registered")
    return score


@dsl.pipeline(name="mpijob-digits", description="MPI training, PyTorch scoring, Model Registry")
def digits_pipeline(spec: dict = spec_input(TRAIN), namespace: str = "", model_name: str = "digits-classifier", version: str = "v1",  # noqa: B008
                    data_connection: str = "local-s3", scoring_runtime: str = "torch-distributed",
                    scoring_runtime_kind: str = "ClusterTrainingRuntime", scoring_image: str = "", min_accuracy: float = 0.9,
                    context: str = "", kubeconfig: str = ""):
    train = run_mpi_job(spec=spec, namespace=namespace, context=context, kubeconfig=kubeconfig)
    score = score_with_pytorch(job=train.outputs["job"], model_uri=train.outputs["model_uri"], artifacts_uri=train.outputs["artifacts_uri"],
                               script=SCORE, data_connection=data_connection, namespace=namespace, runtime=scoring_runtime,
                               runtime_kind=scoring_runtime_kind, image=scoring_image, min_accuracy=min_accuracy, context=context,
                               kubeconfig=kubeconfig)
    register_model(job=train.outputs["job"], name=model_name, version=version, namespace=namespace, context=context,
                   kubeconfig=kubeconfig).after(score)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--compile", metavar="FILE", help="write the pipeline's IR YAML to FILE")
    p.add_argument("--local", action="store_true", help="run it with kfp.local's SubprocessRunner, against your kubeconfig's cluster")
    p.add_argument("--namespace", default="")
    p.add_argument("--context", default="")
    p.add_argument("--kubeconfig", default="")
    a = p.parse_args(argv)
    if not a.compile and not a.local:
        p.error("give --compile FILE or --local")
    if a.compile:
        compiler.Compiler().compile(digits_pipeline, a.compile)
        print(f"wrote {a.compile}")
    if a.local:
        from kfp import local

        local.init(runner=local.SubprocessRunner(use_venv=False))
        run = digits_pipeline(namespace=a.namespace, context=a.context, kubeconfig=a.kubeconfig)
        print(run)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
