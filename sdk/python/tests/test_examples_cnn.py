"""The reference CNN's pure parts (examples/training/cnn_torch.py): where each
MPI launcher puts the rank, the world size and the local rank, and the flag
checks that stop a job before it trains. Nothing here needs PyTorch or MPI."""

from __future__ import annotations

import argparse
import pathlib

import pytest
from support import load_example

ROOT = pathlib.Path(__file__).resolve().parents[3]


cnn = load_example("cnn_torch")


@pytest.mark.parametrize(
    "env,want",
    [
        pytest.param({}, (0, 1, 0), id="no launcher: rank 0 of 1"),
        pytest.param({"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "1"}, (3, 4, 1), id="Open MPI"),
        pytest.param({"PMI_RANK": "5", "PMI_SIZE": "8", "MPI_LOCALRANKID": "1"}, (5, 8, 1), id="MPICH and Intel MPI (Hydra)"),
        pytest.param({"PMIX_RANK": "2", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "0"}, (2, 4, 0), id="Open MPI 5 (PMIx)"),
        pytest.param({"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "PMI_RANK": "0", "PMI_SIZE": "2"}, (1, 2, 1), id="torchrun's names first"),
        pytest.param({"PMI_RANK": "1", "PMI_SIZE": "2"}, (1, 2, 0), id="no local rank: one rank per node"),
    ],
)
def test_launcher_env(env, want):
    assert cnn.launcher_env(env) == want


@pytest.mark.parametrize(
    "env,words",
    [
        pytest.param({"PMI_RANK": "x", "PMI_SIZE": "2"}, "$PMI_RANK='x' is not a number", id="not a number"),
        pytest.param({"PMI_RANK": "4", "PMI_SIZE": "4"}, "rank 4 is outside a world of 4 ranks", id="rank outside the world"),
    ],
)
def test_launcher_env_refuses(env, words):
    with pytest.raises(cnn.UsageError, match=words.replace("$", r"\$")):
        cnn.launcher_env(env)


def _args(*argv: str) -> argparse.Namespace:
    return cnn.parse_args(list(argv))


@pytest.mark.parametrize(
    "argv,size,words",
    [
        pytest.param(["--global-batch", "3"], 4, "--global-batch 3 is smaller than the 4 ranks", id="batch below the ranks"),
        pytest.param(["--global-batch", "0"], 1, "--global-batch 0: must be 1 or more", id="batch zero"),
        pytest.param(["--samples", "100", "--global-batch", "128"], 1, "--global-batch 128 is larger than --samples 100", id="batch above the samples"),
        pytest.param(["--target-accuracy", "95"], 1, "--target-accuracy 95.0: a fraction between 0 and 1", id="accuracy as a percentage"),
        pytest.param(["--mode", "throughput", "--batch-per-rank", "0"], 2, "--batch-per-rank 0: must be 1 or more", id="throughput batch zero"),
        pytest.param(["--mode", "throughput", "--steps", "-1"], 2, "--steps -1: must be 1 or more", id="negative steps"),
        pytest.param(["--threads", "0"], 1, "--threads 0: must be 1 or more", id="no threads"),
        pytest.param(["--overlap", "--bucket-mb", "0"], 2, "--bucket-mb 0.0: must be more than 0", id="empty buckets"),
        pytest.param(["--mode", "throughput", "--alone", "--overlap"], 2, "--alone and --overlap", id="alone sums nothing to overlap"),
    ],
)
def test_check_names_the_flag_value_and_fix(argv, size, words):
    with pytest.raises(cnn.UsageError) as e:
        cnn.check(_args(*argv), size)
    assert words in str(e.value)


def test_check_accepts_the_defaults_on_eight_ranks():
    cnn.check(_args(), 8)
    cnn.check(_args("--mode", "throughput"), 16)
    # throughput mode's per-rank batch is not split, so one image per rank is fine
    cnn.check(_args("--mode", "throughput", "--batch-per-rank", "1"), 16)
    cnn.check(_args("--overlap", "--bucket-mb", "0.25"), 4)
    cnn.check(_args("--mode", "throughput", "--alone"), 8)


def test_throughput_line_prefix_is_what_the_bench_parses():
    bench = (ROOT / "bench/training/bench.py").read_text()
    assert f'PREFIX = "{cnn.THROUGHPUT_PREFIX}"' in bench
