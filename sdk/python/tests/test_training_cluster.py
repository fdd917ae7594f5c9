"""Real training through the SDK on the local cluster and its S3 store:
data connections, progress, artifacts, and the notebook run headless."""

import hashlib
import os
import pathlib
import re
import time
import uuid

import pytest

from mpijob import InvalidJobError, MPIJobClient

pytestmark = pytest.mark.cluster
REPO = pathlib.Path(__file__).resolve().parents[3]
SCRIPT = "/opt/mpijob/examples/digits_mpi4py.py"
DATA = "s3://$(AWS_S3_BUCKET)/datasets/digits/digits.csv.gz"


def unique(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:5]}"


@pytest.fixture
def client(kubeconfig_path):
    return MPIJobClient(namespace="team-a", context="dev-a", config_file=kubeconfig_path)


def test_bad_data_connections_are_refused_before_anything_is_created(client):
    name = unique("sdk-dc")
    with pytest.raises(InvalidJobError) as e:
        client.create_job(name, None, workers=1, data_connection="local-s4")
    assert e.value.field == "data_connection" and "did you mean local-s3?" in str(e.value)
    with pytest.raises(InvalidJobError) as e:
        client.create_job(name, None, workers=1, data_connection=["local-s3", "local-s3"])
    assert e.value.field == "data_connection" and "named twice" in str(e.value)
    with pytest.raises(InvalidJobError) as e:
        client.create_job(name, None, workers=1, pvc="no-such-claim")
    assert e.value.field == "pvc" and "no such PersistentVolumeClaim" in str(e.value)
    with pytest.raises(Exception):  # noqa: B017 - nothing of that name exists
        client.get_job(name)


def test_sdk_trains_from_s3_and_reads_progress_and_artifacts(client, tmp_path):
    name = unique("sdk-digits")
    client.create_job(name, ["mpirun", "python3", SCRIPT, "--data", DATA, "--output", "from-env", "--epochs", "12"],
                      workers=2, slots_per_worker=2, data_connection="local-s3")
    try:
        events = list(client.watch(name, timeout=600))
        training = [ev.message for ev in events if ev.kind == "progress" and ev.message.startswith("training")]
        job = client.wait_for_job(name, timeout=60)
        assert job.status.phase == "Succeeded"
        reports = client.get_progress(name)
        assert [r.epoch for r in reports] == list(range(1, 13)), reports
        assert reports[-1].accuracy is not None and reports[-1].loss < reports[0].loss
        assert all(r.time is not None for r in reports)
        arts = client.get_artifacts(name)
        assert sorted(a["name"] for a in arts) == ["metrics.json", "model.npz"]
        got = client.get_artifacts(name, download_dir=str(tmp_path), files=["metrics.json"])
        assert [a["name"] for a in got] == ["metrics.json"] and (tmp_path / "metrics.json").exists()
        assert not (tmp_path / "model.npz").exists()
        with pytest.raises(InvalidJobError):
            client.get_artifacts(name, download_dir=str(tmp_path), files=["model.pt"])
        # The manager's view: the final report, 100 %, through get_job and watch.
        for _ in range(60):
            job = client.get_job(name)
            if job.progress is not None and job.progress.percent == 100:
                break
            time.sleep(1)
        assert job.progress is not None and job.progress.percent == 100 and job.progress.total_epochs == 12, job.progress
        assert job.progress.metrics["accuracy"] >= 0.9
        assert training, [ev.message for ev in events]
        # The model goes on: registered in the local cluster's real Model Registry, as dev-a.
        model = unique("sdk-digits-classifier")
        reg = client.register_model(name, model, version="v1", new_model=True)
        assert reg.new_model and not reg.unchanged
        assert reg.uri.startswith("s3://team-a/" + name + "/model.npz?") and "defaultRegion=us-east-1" in reg.uri
        again = client.register_model(name, model, version="v1")
        assert again.unchanged and again.version_id == reg.version_id
        with pytest.raises(InvalidJobError) as e:
            client.register_model(name, model.replace("classifier", "clasifier"), version="v2")
        assert e.value.field == "name" and f"did you mean register_model({name!r}, {model!r}" in str(e.value)
        with pytest.raises(InvalidJobError) as e:
            client.register_model(name, "digits classifier")
        assert e.value.field == "name" and "digits classifier" in str(e.value)
    finally:
        client.delete_job(name)


def test_notebook_runs_headless(kubeconfig_path, tmp_path):
    """examples/notebooks: the whole journey, executed as a data scientist would, with nbclient."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(REPO / "examples" / "notebooks" / "digits_s3_journey.ipynb", as_version=4)
    env = {"KUBECONFIG": kubeconfig_path, "MPIJOB_CONTEXT": "dev-a", "MPIJOB_NAMESPACE": "team-a",
           "MPIJOB_NOTEBOOK_JOB": unique("nb-digits")}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        NotebookClient(nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    out = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "Succeeded" in out and "accuracy in the job" in out, out
    assert "registered digits-classifier-" + env["MPIJOB_NOTEBOOK_JOB"] + " v1: s3://team-a/" in out, out
    assert (tmp_path / env["MPIJOB_NOTEBOOK_JOB"] / "loss.png").stat().st_size > 1000


def test_sdk_reads_artifacts_off_a_pvc(client, tmp_path, kubeconfig_path):
    """A job with pvc= and no data connection writes to file:///mnt/CLAIM/JOB/; get_artifacts
    reads it through a reader pod it starts as the user and deletes, byte for byte."""
    name = unique("sdk-pvc")
    write = ('set -e; d="${MPIJOB_OUTPUT_URI#file://}"; mkdir -p "$d/sub"; '
             'head -c 70000 /dev/urandom > "$d/sub/blob.bin"; sha256sum "$d/sub/blob.bin"; echo done > "$d/done.txt"')
    client.create_job(name, ["sh", "-c", write], workers=1, pvc="shared-data")
    try:
        job = client.wait_for_job(name, timeout=300)
        assert job.status.phase == "Succeeded", job.status
        digest = re.search(r"\b([0-9a-f]{64})\b", client.get_logs(name)).group(1)
        arts = client.get_artifacts(name)
        assert [(a["name"], a["size"]) for a in arts] == [("done.txt", 5), ("sub/blob.bin", 70000)]
        assert arts[0]["uri"] == f"pvc://shared-data/{name}/done.txt"
        got = client.get_artifacts(name, download_dir=str(tmp_path), files=["sub/blob.bin"])
        assert hashlib.sha256((tmp_path / "sub" / "blob.bin").read_bytes()).hexdigest() == digest
        assert [a["path"] for a in got] == [str(tmp_path / "sub" / "blob.bin")]
        viewer = MPIJobClient(namespace="team-a", context="viewer-a", config_file=kubeconfig_path)
        with pytest.raises(PermissionError, match="reading a claim takes a short-lived pod"):
            viewer.get_artifacts(name)
        left = [p for p in _reader_pods(kubeconfig_path, name) if p.metadata.deletion_timestamp is None]
        assert left == [], "reader pods left behind"
    finally:
        client.delete_job(name)


def _reader_pods(kubeconfig_path, job):
    from kubernetes import client as k8s
    from kubernetes import config as k8s_config

    api = k8s.CoreV1Api(k8s_config.new_client_from_config(config_file=kubeconfig_path, context="admin"))
    return api.list_namespaced_pod("team-a", label_selector=f"mpijob.dev/artifacts-reader={job}").items
