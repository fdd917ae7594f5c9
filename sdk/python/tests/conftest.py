import os
import pathlib
import tempfile

import pytest
import yaml

from mpijob import MPIJobClient

REPO = pathlib.Path(__file__).resolve().parents[3]


def kubeconfig() -> str:
    return os.environ.get("MPIJOB_KUBECONFIG") or str(REPO / ".local" / "kubeconfig")


@pytest.fixture(scope="session")
def kubeconfig_path() -> str:
    path = kubeconfig()
    if not os.path.exists(path):
        pytest.fail(f"no cluster to test against ({path} is missing): run `make dev-detach` or set MPIJOB_KUBECONFIG")
    return path


@pytest.fixture
def offline_client():
    # A kubeconfig for a server that is not there: validation must fail first.
    cfg = {"apiVersion": "v1", "kind": "Config", "current-context": "x",
           "clusters": [{"name": "x", "cluster": {"server": "https://127.0.0.1:1"}}],
           "users": [{"name": "x", "user": {"token": "t"}}],
           "contexts": [{"name": "x", "context": {"cluster": "x", "user": "x", "namespace": "ns1"}}]}
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        yaml.safe_dump(cfg, f)
    return MPIJobClient(config_file=f.name)
