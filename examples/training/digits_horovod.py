"""Horovod with PyTorch on CPU: data-parallel training of scikit-learn's digits.

Every rank builds the same network from the same seed, Horovod broadcasts
rank 0's weights, and hvd.DistributedOptimizer averages the gradients of the
ranks' shares of each global batch over MPI (Horovod's allreduce). The
mpi-horovod image ships it:

    kubectl mpijob create hvd --runtime mpi-horovod --workers 2 --slots-per-worker 2 -- \\
        mpirun python3 /opt/mpijob/examples/digits_horovod.py

Rank 0 prints the test accuracy ("test accuracy 0.9xxx").
"""

from __future__ import annotations

import argparse
import socket
import sys
import time

import horovod.torch as hvd
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

    hvd.init()
    torch.set_num_threads(1)  # one core per rank: the slots are the cores
    rank, size = hvd.rank(), hvd.size()
    print(f"rank {rank} of {size} on {socket.gethostname()}", flush=True)

    digits = load_digits()
    x = torch.tensor(digits.data / 16.0, dtype=torch.float32)
    y = torch.tensor(digits.target, dtype=torch.long)
    order = np.random.default_rng(args.seed).permutation(len(y))
    cut = int(len(y) * 0.8)
    train, test = order[:cut], order[cut:]

    torch.manual_seed(args.seed)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=args.lr), named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    loss_fn = torch.nn.CrossEntropyLoss()

    shuffle = np.random.default_rng(args.seed + 1)
    start = time.monotonic()
    for epoch in range(1, args.epochs + 1):
        perm = train[shuffle.permutation(len(train))]
        for s in range(0, len(perm), args.batch_size):
            mine = perm[s : s + args.batch_size][rank::size]
            opt.zero_grad()
            loss = loss_fn(model(x[mine]), y[mine])
            loss.backward()
            opt.step()  # Horovod averages the ranks' gradients first
        with torch.no_grad():
            acc = float((model(x[test]).argmax(dim=1) == y[test]).float().mean())
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
