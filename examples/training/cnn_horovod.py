"""The reference CNN through Horovod: cnn_torch.py's model and data, Horovod's allreduce.

The same convolutional model learns the same digits (scikit-learn's,
upsampled to 32x32 and augmented; nothing fetched) as
``cnn_torch.py --mode accuracy``, but hvd.DistributedOptimizer averages the
gradients of the ranks' shares of each global batch (Horovod's allreduce
over MPI) and hvd.broadcast_parameters gives every rank rank 0's weights.
The mpi-horovod image ships it:

    kubectl mpijob create hvd-cnn --runtime mpi-horovod --workers 2 --slots-per-worker 2 -- \\
        mpirun python3 /opt/mpijob/examples/cnn_horovod.py --output from-env

Rank 0 prints a progress report per epoch, the final "test accuracy X",
writes model.pt and metrics.json to --output, and exits 3 below
--target-accuracy.

Checkpoints, as cnn_torch.py's: rank 0 writes one to $MPIJOB_CHECKPOINT_URI
after every --checkpoint-every epochs and once more on SIGTERM (a
preemption, a suspend, a retry: the ranks agree at the next step through
Horovod's allreduce); at start every rank resumes from the newest complete
one (weights, optimizer, epoch, step and the data order), which rank 0
reads and hvd.broadcast_object sends to the others.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpijob_io
from cnn_torch import digits32, model

try:  # in mpijob's images, next to this file
    import mpijob_checkpoint as checkpoint
except ImportError:  # the SDK's copy
    from mpijob import checkpoint


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--width", type=int, default=32)
    p.add_argument("--samples", type=int, default=6000)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--global-batch", type=int, default=64, help="images per step, split over the ranks")
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--target-accuracy", type=float, default=0.95)
    p.add_argument("--output", default="", help="folder for model.pt and metrics.json (rank 0): a path, s3://BUCKET/PREFIX/ or from-env ($MPIJOB_OUTPUT_URI)")
    p.add_argument("--checkpoint", default="from-env", help="checkpoint place: from-env ($MPIJOB_CHECKPOINT_URI, none when unset), a folder URI, or none")
    p.add_argument("--checkpoint-every", type=int, default=1, help="write a checkpoint every N epochs (and once more on SIGTERM)")
    args = p.parse_args(argv)

    import horovod
    import horovod.torch as hvd
    import torch

    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    for name in ("width", "samples", "epochs", "global_batch", "checkpoint_every"):
        if getattr(args, name) <= 0:
            if rank == 0:
                print(f"error: --{name.replace('_', '-')} {getattr(args, name)}: must be 1 or more", file=sys.stderr, flush=True)
            return 2
    if args.global_batch < size:
        if rank == 0:
            print(f"error: --global-batch {args.global_batch} is smaller than the {size} ranks: use --global-batch {size} or more", file=sys.stderr, flush=True)
        return 2
    output = os.environ.get("MPIJOB_OUTPUT_URI", "") if args.output == "from-env" else args.output
    if args.output == "from-env" and not output:
        if rank == 0:
            print("error: --output from-env: $MPIJOB_OUTPUT_URI is not set (the job has no data connection or PVC)", file=sys.stderr, flush=True)
        return 2
    torch.set_num_threads(1)  # one core per rank: the slots are the cores
    print(f"rank {rank} of {size} on {socket.gethostname()}, Horovod {horovod.__version__}", flush=True)

    torch.manual_seed(args.seed)
    xtrain, ytrain, xtest, ytest = digits32(torch, args.samples, args.seed)
    net = model(torch, 1, args.width)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9), named_parameters=net.named_parameters())
    hvd.broadcast_parameters(net.state_dict(), root_rank=0)
    loss_fn = torch.nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(args.seed + 2)
    steps = math.ceil(args.samples / args.global_batch)
    place = os.environ.get(checkpoint.CHECKPOINT_ENV, "") if args.checkpoint == "from-env" else ("" if args.checkpoint == "none" else args.checkpoint)
    stop = checkpoint.StopOnSignal()
    done_epochs, done_steps = 0, 0
    if place or os.environ.get(checkpoint.RESUME_ENV):
        got = checkpoint.load_on_rank0(rank, lambda o: hvd.broadcast_object(o, root_rank=0), place or None, like={"model": net.state_dict()})
        if got is not None:
            net.load_state_dict(got.state["model"])
            opt.load_state_dict(got.state["optimizer"])
            gen.set_state(got.state["order"])
            checkpoint.set_rng_state(got.state["rng"])
            done_epochs, done_steps = got.epoch, got.step
            if rank == 0:
                print(f"resumed from epoch {got.epoch}, step {got.step} of {args.epochs} epochs: {got.uri} (written {got.age_seconds():.0f}s ago)", flush=True)
                mpijob_io.progress(epoch=got.epoch, total_epochs=args.epochs, step=got.epoch * steps + got.step, total_steps=args.epochs * steps,
                                   resumed=checkpoint.resumed_report(got))

    def agreed(flag: int) -> int:
        return int(hvd.allreduce(torch.tensor(flag), op=hvd.Sum))

    def save(epochs: int, step: int, order_state) -> None:
        if rank == 0 and place:
            c = checkpoint.save({"model": net.state_dict(), "optimizer": opt.state_dict(), "order": order_state, "rng": checkpoint.rng_state()},
                                epoch=epochs, step=step, total_epochs=args.epochs, uri=place)
            print(f"checkpoint written: epoch {epochs}, step {step}: {c.uri}", flush=True)

    start = time.monotonic()
    acc, loss_avg = 0.0, 0.0
    for epoch in range(done_epochs + 1, args.epochs + 1):
        before_epoch = gen.get_state()
        order = torch.randperm(args.samples, generator=gen)
        total = 0.0
        first = done_steps if epoch == done_epochs + 1 else 0
        for s in range(first, steps):
            # Every rank stops at the same step once one got SIGTERM.
            if place and stop.requested(agreed):
                save(epoch - 1, s, before_epoch)
                stop.finish(agreed)  # no rank leaves before the checkpoint is written
                print(f"rank {rank}: stopped by SIGTERM at epoch {epoch}, step {s}; the checkpoint has it", file=sys.stderr, flush=True)
                return 143
            mine = order[s * args.global_batch : (s + 1) * args.global_batch][rank::size]
            opt.zero_grad()
            loss = loss_fn(net(xtrain[mine]), ytrain[mine])
            loss.backward()
            opt.step()  # Horovod averages the ranks' gradients first
            total += float(loss.detach()) * len(mine)
        if epoch % args.checkpoint_every == 0 or epoch == args.epochs:
            save(epoch, 0, gen.get_state())
        with torch.no_grad():
            correct = float((net(xtest[rank::size]).argmax(1) == ytest[rank::size]).sum())
        sums = hvd.allreduce(torch.tensor([correct, total], dtype=torch.float64), op=hvd.Sum, name=f"epoch{epoch}")
        acc, loss_avg = float(sums[0]) / len(ytest), float(sums[1]) / args.samples
        if rank == 0:
            elapsed = time.monotonic() - start
            eta = elapsed / (epoch - done_epochs) * (args.epochs - epoch)
            print(f"epoch {epoch}/{args.epochs} loss {loss_avg:.4f} test accuracy {acc:.4f} elapsed {elapsed:.1f}s eta {eta:.1f}s", flush=True)
            mpijob_io.progress(epoch=epoch, total_epochs=args.epochs, loss=round(loss_avg, 6), accuracy=round(acc, 6), eta_seconds=round(eta, 1))
    if done_epochs >= args.epochs:
        # Resumed after the last epoch: the model is the finished one.
        with torch.no_grad():
            correct = float((net(xtest[rank::size]).argmax(1) == ytest[rank::size]).sum())
        acc = float(hvd.allreduce(torch.tensor([correct], dtype=torch.float64), op=hvd.Sum, name="final")[0]) / len(ytest)
    if rank != 0:
        return 0
    seconds = time.monotonic() - start
    print(f"test accuracy {acc:.4f} on {len(ytest)} digits after {args.epochs} epochs, {size} ranks, {seconds:.1f}s", flush=True)
    if output:
        buf = io.BytesIO()
        torch.save(net.state_dict(), buf)
        where = mpijob_io.write(output, "model.pt", buf.getvalue())
        metrics = {"accuracy": acc, "loss": loss_avg, "epochs": args.epochs, "ranks": size, "seconds": round(seconds, 3),
                   "framework": f"horovod {horovod.__version__}, torch {torch.__version__}"}
        mpijob_io.write(output, "metrics.json", json.dumps(metrics, indent=2).encode())
        print(f"model and metrics written to {where.rsplit('/', 1)[0]}/", flush=True)
    if acc < args.target_accuracy:
        print(f"test accuracy {acc:.4f} is below --target-accuracy {args.target_accuracy}", file=sys.stderr, flush=True)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
