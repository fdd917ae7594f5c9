"""Horovod with PyTorch on CPU: data-parallel training of scikit-learn's digits.

Every rank builds the same network from the same seed, Horovod broadcasts
rank 0's weights, and hvd.DistributedOptimizer averages the gradients of the
ranks' shares of each global batch over MPI (Horovod's allreduce). The
mpi-horovod image ships it:

    kubectl mpijob create hvd --runtime mpi-horovod --workers 2 --slots-per-worker 2 -- \\
        mpirun python3 /opt/mpijob/examples/digits_horovod.py

Rank 0 prints the test accuracy ("test accuracy 0.9xxx"). In a job with a
data connection or a PVC it checkpoints to $MPIJOB_CHECKPOINT_URI after every
epoch and on SIGTERM, and resumes from the newest checkpoint (or
$MPIJOB_RESUME_FROM) at start, as digits_mpi4py.py does (docs/training.md,
"Checkpoints and resume").
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time

import horovod.torch as hvd
import numpy as np
import torch
from sklearn.datasets import load_digits

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpijob_io

try:  # in mpijob's images, next to this file
    import mpijob_checkpoint as checkpoint
except ImportError:  # the SDK's copy
    from mpijob import checkpoint


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--batch-size", type=int, default=64, help="global batch, split over the ranks")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--min-accuracy", type=float, default=0.0, help="exit 3 when the test accuracy is lower")
    p.add_argument("--checkpoint", default="from-env", help="checkpoint place: from-env ($MPIJOB_CHECKPOINT_URI, none when unset), a folder URI, or none")
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
    steps = (len(train) + args.batch_size - 1) // args.batch_size
    place = os.environ.get(checkpoint.CHECKPOINT_ENV, "") if args.checkpoint == "from-env" else ("" if args.checkpoint == "none" else args.checkpoint)
    stop = checkpoint.StopOnSignal()
    done_epochs, done_steps = 0, 0
    if place or os.environ.get(checkpoint.RESUME_ENV):
        got = checkpoint.load_on_rank0(rank, lambda o: hvd.broadcast_object(o, root_rank=0), place or None, like={"model": model.state_dict()})
        if got is not None:
            model.load_state_dict(got.state["model"])
            opt.load_state_dict(got.state["optimizer"])
            shuffle.bit_generator.state = got.state["shuffle"]
            done_epochs, done_steps = got.epoch, got.step
            if rank == 0:
                print(f"resumed from epoch {got.epoch}, step {got.step} of {args.epochs} epochs: {got.uri} (written {got.age_seconds():.0f}s ago)", flush=True)
                mpijob_io.progress(epoch=got.epoch, total_epochs=args.epochs, step=got.epoch * steps + got.step, total_steps=args.epochs * steps,
                                   resumed=checkpoint.resumed_report(got))

    def save(epochs: int, step: int, before_epoch: dict) -> None:
        if rank == 0 and place:
            c = checkpoint.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "shuffle": before_epoch},
                                epoch=epochs, step=step, total_epochs=args.epochs, uri=place)
            print(f"checkpoint written: epoch {epochs}, step {step}: {c.uri}", flush=True)

    start = time.monotonic()
    acc = 0.0
    loss = torch.zeros(())
    for epoch in range(done_epochs + 1, args.epochs + 1):
        before_epoch = shuffle.bit_generator.state
        perm = train[shuffle.permutation(len(train))]
        first = done_steps if epoch == done_epochs + 1 else 0
        for i in range(first, steps):
            # Every rank stops at the same step once one got SIGTERM.
            if place and stop.requested(lambda flag: int(hvd.allreduce(torch.tensor(flag), op=hvd.Sum))):
                save(epoch - 1, i, before_epoch)
                stop.finish(lambda flag: int(hvd.allreduce(torch.tensor(flag), op=hvd.Sum)))
                print(f"rank {rank}: stopped by SIGTERM at epoch {epoch}, step {i}; the checkpoint has it", file=sys.stderr, flush=True)
                return 143
            s = i * args.batch_size
            mine = perm[s : s + args.batch_size][rank::size]
            opt.zero_grad()
            loss = loss_fn(model(x[mine]), y[mine])
            loss.backward()
            opt.step()  # Horovod averages the ranks' gradients first
        save(epoch, 0, shuffle.bit_generator.state)
        with torch.no_grad():
            acc = float((model(x[test]).argmax(dim=1) == y[test]).float().mean())
        if rank == 0:
            elapsed = time.monotonic() - start
            print(f"epoch {epoch}/{args.epochs} loss {loss.item():.4f} test accuracy {acc:.4f} "
                  f"elapsed {elapsed:.1f}s eta {elapsed / (epoch - done_epochs) * (args.epochs - epoch):.1f}s", flush=True)
    if done_epochs >= args.epochs:
        with torch.no_grad():
            acc = float((model(x[test]).argmax(dim=1) == y[test]).float().mean())
    if rank != 0:
        return 0
    print(f"test accuracy {acc:.4f} on {len(test)} digits after {args.epochs} epochs, {size} ranks, "
          f"{time.monotonic() - start:.1f}s", flush=True)
    return 3 if acc < args.min_accuracy else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
