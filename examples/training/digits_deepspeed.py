"""DeepSpeed on CPU over MPI: data-parallel training of scikit-learn's digits.

mpirun starts the ranks; DeepSpeed finds rank, world size and the master
address from MPI (auto_mpi_discovery) and runs its collectives over
torch.distributed's gloo backend, since there is no GPU. The mpi-deepspeed
image ships it:

    kubectl mpijob create ds --runtime mpi-deepspeed --workers 2 --slots-per-worker 2 -- \\
        mpirun python3 /opt/mpijob/examples/digits_deepspeed.py

Rank 0 prints the test accuracy ("test accuracy 0.9xxx").
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time

os.environ.setdefault("DS_ACCELERATOR", "cpu")

import deepspeed
import numpy as np
import torch
from sklearn.datasets import load_digits


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--batch-size", type=int, default=64, help="global batch, split over the ranks")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--min-accuracy", type=float, default=0.0, help="exit 3 when the test accuracy is lower")
    args = p.parse_args(argv)

    torch.set_num_threads(1)  # one core per rank: the slots are the cores
    deepspeed.init_distributed(dist_backend="gloo", auto_mpi_discovery=True)
    rank, size = torch.distributed.get_rank(), torch.distributed.get_world_size()
    print(f"rank {rank} of {size} on {socket.gethostname()}", flush=True)
    if args.batch_size % size:
        print(f"--batch-size {args.batch_size} must be a multiple of the {size} ranks", file=sys.stderr)
        return 2

    digits = load_digits()
    x = torch.tensor(digits.data / 16.0, dtype=torch.float32)
    y = torch.tensor(digits.target, dtype=torch.long)
    order = np.random.default_rng(args.seed).permutation(len(y))
    cut = int(len(y) * 0.8)
    train, test = order[:cut], order[cut:]

    torch.manual_seed(args.seed)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    config = {
        "train_batch_size": args.batch_size,
        "train_micro_batch_size_per_gpu": args.batch_size // size,
        "optimizer": {"type": "SGD", "params": {"lr": args.lr}},
    }
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)
    loss_fn = torch.nn.CrossEntropyLoss()

    shuffle = np.random.default_rng(args.seed + 1)
    start = time.monotonic()
    acc = 0.0
    for epoch in range(1, args.epochs + 1):
        perm = train[shuffle.permutation(len(train))]
        # Whole global batches only: DeepSpeed's batch size is fixed.
        for s in range(0, len(perm) - args.batch_size + 1, args.batch_size):
            mine = perm[s : s + args.batch_size][rank::size]
            loss = loss_fn(engine(x[mine]), y[mine])
            engine.backward(loss)  # DeepSpeed averages the ranks' gradients
            engine.step()
        with torch.no_grad():
            acc = float((engine(x[test]).argmax(dim=1) == y[test]).float().mean())
        if rank == 0:
            elapsed = time.monotonic() - start
            print(f"epoch {epoch}/{args.epochs} loss {loss.item():.4f} test accuracy {acc:.4f} "
                  f"elapsed {elapsed:.1f}s eta {elapsed / epoch * (args.epochs - epoch):.1f}s", flush=True)
    if rank != 0:
        return 0
    print(f"test accuracy {acc:.4f} on {len(test)} digits after {args.epochs} epochs, {size} ranks, "
          f"{time.monotonic() - start:.1f}s", flush=True)
    return 3 if acc < args.min_accuracy else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
