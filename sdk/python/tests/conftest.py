import os
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]


def kubeconfig() -> str:
    return os.environ.get("MPIJOB_KUBECONFIG") or str(REPO / ".local" / "kubeconfig")


@pytest.fixture(scope="session")
def kubeconfig_path() -> str:
    path = kubeconfig()
    if not os.path.exists(path):
        pytest.fail(f"no cluster to test against ({path} is missing): run `make dev-detach` or set MPIJOB_KUBECONFIG")
    return path
