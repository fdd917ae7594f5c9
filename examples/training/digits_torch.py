"""PyTorch data-parallel training over MPI, Horovod-style, with mpi4py.

Every rank holds the same model (rank 0's initial weights, broadcast), trains
on its share of each global batch, and the gradients are averaged across
ranks with MPI_Allreduce every step before the same optimizer step on every
rank. The data is scikit-learn's bundled handwritten digits (nothing is
fetched), or a copy of it from a data connection (--data s3://...). CPU
PyTorch from Debian (python3-torch): no GPU stack needed.

    kubectl mpijob create digits-torch --workers 2 --slots-per-worker 2 -- \\
        mpirun python3 /opt/mpijob/examples/digits_torch.py --output from-env

The global batch is fixed and split over the ranks, so with a fixed seed 1,
2 and 4 ranks take the same steps and reach the same accuracy, up to
floating-point summation order. Rank 0 prints a progress report per epoch
(docs/progress.md), the final "test accuracy X", and with --output writes
model.pt (a state_dict) and metrics.json.

It checkpoints and resumes as digits_mpi4py.py does (weights, optimizer,
epoch, step, random state; docs/training.md, "Checkpoints and resume").
"""

from __future__ import annotations

import argparse
import io
import json
import os
import socket
import sys
import time

import numpy as np
import torch
from mpi4py import MPI

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpijob_io
from digits_mpi4py import load, split

try:  # in mpijob's images, next to this file
    import mpijob_checkpoint as checkpoint
except ImportError:  # the SDK's copy
    from mpijob import checkpoint


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=64, help="global batch, split over the ranks")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data", default="", help="digits.csv.gz: a path, file:///path or s3://BUCKET/KEY (default: scikit-learn's copy)")
    p.add_argument("--output", default="", help="folder for model.pt and metrics.json (rank 0): a path, s3://BUCKET/PREFIX/ or from-env ($MPIJOB_OUTPUT_URI)")
    p.add_argument("--min-accuracy", type=float, default=0.0, help="exit 3 when the test accuracy is lower")
    p.add_argument("--checkpoint", default="from-env", help="checkpoint place: from-env ($MPIJOB_CHECKPOINT_URI, none when unset), a folder URI, or none")
    p.add_argument("--checkpoint-every", type=int, default=1, help="write a checkpoint every N epochs (and once more on SIGTERM)")
    p.add_argument("--epoch-seconds", type=float, default=0.0, help="make each epoch last at least this long (to try preemption and retries)")
    p.add_argument("--fail-once-at-epoch", type=int, default=0, help="rank 1 (else 0) exits 1 at the start of this epoch unless the run resumed (to try --retries)")
    return p.parse_args(argv)


def model(hidden: int) -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(64, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 10))


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    print(f"rank {rank} of {size} on {socket.gethostname()}", flush=True)
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)  # one core per rank: ranks share a Worker's CPUs
    output = os.environ.get("MPIJOB_OUTPUT_URI", "") if args.output == "from-env" else args.output
    if args.output == "from-env" and not output:
        print("--output from-env: $MPIJOB_OUTPUT_URI is not set (the job has no data connection or PVC)", file=sys.stderr, flush=True)
        return 2

    x, y = None, None
    if rank == 0:
        x, y = load(args.data)
    x, y = comm.bcast((x, y), root=0)
    train, test = split(len(y), args.seed)
    xt = torch.tensor(x, dtype=torch.float64)
    yt = torch.tensor(y, dtype=torch.long)

    net = model(args.hidden).double()
    for p in net.parameters():  # every rank starts from rank 0's weights
        buf = p.data.numpy()
        comm.Bcast(buf, root=0)
    opt = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss(reduction="sum")

    shuffle = np.random.default_rng(args.seed + 1)
    steps = int(np.ceil(len(train) / args.batch_size))
    place = os.environ.get(checkpoint.CHECKPOINT_ENV, "") if args.checkpoint == "from-env" else ("" if args.checkpoint == "none" else args.checkpoint)
    stop = checkpoint.StopOnSignal()
    done_epochs, done_steps, resumed = 0, 0, None
    if place or os.environ.get(checkpoint.RESUME_ENV):
        got = checkpoint.load_on_rank0(rank, lambda o: comm.bcast(o, root=0), place or None, like={"model": net.state_dict()})
        if got is not None:
            net.load_state_dict(got.state["model"])
            opt.load_state_dict(got.state["optimizer"])
            shuffle.bit_generator.state = got.state["shuffle"]
            checkpoint.set_rng_state(got.state["rng"])
            done_epochs, done_steps, resumed = got.epoch, got.step, got
            if rank == 0:
                print(f"resumed from epoch {got.epoch}, step {got.step} of {args.epochs} epochs: {got.uri} "
                      f"(written {got.age_seconds():.0f}s ago)", flush=True)
                mpijob_io.progress(epoch=got.epoch, total_epochs=args.epochs, step=got.epoch * steps + got.step,
                                   total_steps=args.epochs * steps, resumed=checkpoint.resumed_report(got))

    def save(epochs: int, step: int, before_epoch: dict, total: float) -> None:
        if rank == 0 and place:
            c = checkpoint.save({"model": net.state_dict(), "optimizer": opt.state_dict(), "shuffle": before_epoch,
                                 "rng": checkpoint.rng_state(), "total": total},
                                epoch=epochs, step=step, total_epochs=args.epochs, uri=place)
            print(f"checkpoint written: epoch {epochs}, step {step}: {c.uri}", flush=True)

    start = time.monotonic()
    acc = 0.0
    for epoch in range(done_epochs + 1, args.epochs + 1):
        if epoch == args.fail_once_at_epoch and resumed is None and rank == min(1, size - 1):
            print(f"rank {rank}: failing at the start of epoch {epoch} as --fail-once-at-epoch asks", file=sys.stderr, flush=True)
            comm.Abort(1)
        epoch_start = time.monotonic()
        before_epoch = shuffle.bit_generator.state
        order = train[shuffle.permutation(len(train))]
        first, total = 0, 0.0
        if epoch == done_epochs + 1 and done_steps:
            first, total = done_steps, float(resumed.state.get("total", 0.0))
        for s in range(first, steps):
            if stop.requested(comm):
                save(epoch - 1, s, before_epoch, total)
                stop.finish(comm)
                print(f"rank {rank}: stopped by SIGTERM at epoch {epoch}, step {s}; the checkpoint has it", file=sys.stderr, flush=True)
                return 143
            batch = order[s * args.batch_size : (s + 1) * args.batch_size]
            mine = torch.from_numpy(batch[rank::size])
            opt.zero_grad()
            loss = loss_fn(net(xt[mine]), yt[mine]) if len(mine) else torch.zeros((), dtype=torch.float64, requires_grad=True)
            loss.backward()
            # Average the gradients over the global batch: sum over ranks,
            # divide by the batch size (every rank's loss is a sum).
            flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in net.parameters()]).numpy()
            summed = np.empty_like(flat)
            comm.Allreduce(flat, summed, op=MPI.SUM)
            offset = 0
            for p in net.parameters():
                n = p.numel()
                p.grad = torch.from_numpy(summed[offset : offset + n].reshape(p.shape) / len(batch))
                offset += n
            opt.step()
            total += comm.allreduce(float(loss.detach()), op=MPI.SUM)
            if args.epoch_seconds:
                time.sleep(max(0.0, epoch_start + args.epoch_seconds * (s + 1) / steps - time.monotonic()))
        if epoch % args.checkpoint_every == 0 or epoch == args.epochs:
            save(epoch, 0, shuffle.bit_generator.state, 0.0)
        with torch.no_grad():
            acc = float((net(xt[test]).argmax(dim=1) == yt[test]).double().mean())
        if rank == 0:
            elapsed = time.monotonic() - start
            eta = elapsed / (epoch - done_epochs) * (args.epochs - epoch)
            print(f"epoch {epoch}/{args.epochs} loss {total / len(train):.4f} test accuracy {acc:.4f} elapsed {elapsed:.1f}s eta {eta:.1f}s", flush=True)
            mpijob_io.progress(epoch=epoch, total_epochs=args.epochs, loss=round(total / len(train), 6), accuracy=round(acc, 6), eta_seconds=round(eta, 1))

    if done_epochs >= args.epochs:
        with torch.no_grad():
            acc = float((net(xt[test]).argmax(dim=1) == yt[test]).double().mean())
    if rank != 0:
        return 0
    seconds = time.monotonic() - start
    print(f"test accuracy {acc:.4f} on {len(test)} digits after {args.epochs} epochs, {size} ranks, {seconds:.1f}s", flush=True)
    if output:
        buf = io.BytesIO()
        torch.save(net.state_dict(), buf)
        where = mpijob_io.write(output, "model.pt", buf.getvalue())
        metrics = {"accuracy": acc, "epochs": args.epochs, "ranks": size, "seconds": round(seconds, 3), "seed": args.seed,
                   "hidden": args.hidden, "data": args.data or "sklearn", "framework": f"torch {torch.__version__}"}
        mpijob_io.write(output, "metrics.json", json.dumps(metrics, indent=2).encode())
        print(f"model and metrics written to {where.rsplit('/', 1)[0]}/", flush=True)
    if acc < args.min_accuracy:
        print(f"test accuracy {acc:.4f} is below --min-accuracy {args.min_accuracy}", file=sys.stderr, flush=True)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
