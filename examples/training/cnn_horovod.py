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
    args = p.parse_args(argv)

    import horovod
    import horovod.torch as hvd
    import torch

    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    for name in ("width", "samples", "epochs", "global_batch"):
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
    start = time.monotonic()
    acc, loss_avg = 0.0, 0.0
    for epoch in range(1, args.epochs + 1):
        order = torch.randperm(args.samples, generator=gen)
        total = 0.0
        for s in range(steps):
            mine = order[s * args.global_batch : (s + 1) * args.global_batch][rank::size]
            opt.zero_grad()
            loss = loss_fn(net(xtrain[mine]), ytrain[mine])
            loss.backward()
            opt.step()  # Horovod averages the ranks' gradients first
            total += float(loss.detach()) * len(mine)
        with torch.no_grad():
            correct = float((net(xtest[rank::size]).argmax(1) == ytest[rank::size]).sum())
        sums = hvd.allreduce(torch.tensor([correct, total], dtype=torch.float64), op=hvd.Sum, name=f"epoch{epoch}")
        acc, loss_avg = float(sums[0]) / len(ytest), float(sums[1]) / args.samples
        if rank == 0:
            elapsed = time.monotonic() - start
            eta = elapsed / epoch * (args.epochs - epoch)
            print(f"epoch {epoch}/{args.epochs} loss {loss_avg:.4f} test accuracy {acc:.4f} elapsed {elapsed:.1f}s eta {eta:.1f}s", flush=True)
            mpijob_io.progress(epoch=epoch, total_epochs=args.epochs, loss=round(loss_avg, 6), accuracy=round(acc, 6), eta_seconds=round(eta, 1))
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
