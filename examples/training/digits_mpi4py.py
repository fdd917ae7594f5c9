"""Data-parallel training with mpi4py and NumPy: the smallest real MPI job.

A two-layer network learns scikit-learn's bundled handwritten digits (1,797
8x8 images, shipped with the package: nothing is fetched). Every rank holds
the same model; each step every rank computes the gradient of its share of
the global batch, MPI_Allreduce sums the gradients, and every rank applies
the same update. With a fixed seed the result matches one process's on any
number of ranks, up to floating-point summation order.

Run it as an MPI job (every mpijob image ships it):

    kubectl mpijob create digits --workers 2 --slots-per-worker 2 -- \\
        mpirun python3 /opt/mpijob/examples/digits_mpi4py.py

Rank 0 prints the test accuracy ("test accuracy 0.9xxx"), a progress report
per epoch (docs/progress.md) and, with --output, writes the model
(model.npz) and metrics.json there: a folder, file:///path or
s3://BUCKET/PREFIX/. --output from-env takes $MPIJOB_OUTPUT_URI, which a job
with a data connection or a PVC has (s3://BUCKET/JOB/ on the first data
connection). --data reads the digits from a location instead of
scikit-learn's copy (the local cluster's buckets hold it at
s3://BUCKET/datasets/digits/digits.csv.gz).

Checkpoints (docs/training.md, "Checkpoints and resume"): in a job with a
data connection or a PVC, rank 0 writes one to $MPIJOB_CHECKPOINT_URI after
every --checkpoint-every epochs, and once more when the job is stopped
(SIGTERM: a preemption, a suspend, a drained node). At start every rank
resumes from the newest complete one (weights, epoch, step and the shuffle's
random state), else from $MPIJOB_RESUME_FROM (--resume-from), and says so
in a progress report. The result of a resumed run is the uninterrupted
run's.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import os
import socket
import sys
import time

import numpy as np
from mpi4py import MPI

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpijob_io

try:  # in mpijob's images, next to this file
    import mpijob_checkpoint as checkpoint
except ImportError:  # the SDK's copy
    from mpijob import checkpoint


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--batch-size", type=int, default=64, help="global batch, split over the ranks")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output", default="", help="folder for model.npz and metrics.json (rank 0): a path, file:///path, s3://BUCKET/PREFIX/, or from-env ($MPIJOB_OUTPUT_URI)")
    p.add_argument("--data", default="", help="digits.csv.gz to learn from: a path, file:///path or s3://BUCKET/KEY (default: scikit-learn's copy)")
    p.add_argument("--min-accuracy", type=float, default=0.0, help="exit 3 when the test accuracy is lower")
    p.add_argument("--checkpoint", default="from-env", help="checkpoint place: from-env ($MPIJOB_CHECKPOINT_URI, none when unset), a folder URI, or none")
    p.add_argument("--checkpoint-every", type=int, default=1, help="write a checkpoint every N epochs (and once more on SIGTERM)")
    p.add_argument("--epoch-seconds", type=float, default=0.0, help="make each epoch last at least this long (to try preemption and retries)")
    p.add_argument("--fail-once-at-epoch", type=int, default=0, help="rank 1 (else 0) exits 1 at the start of this epoch unless the run resumed (to try --retries)")
    return p.parse_args(argv)


def load(uri: str) -> tuple[np.ndarray, np.ndarray]:
    """The digits as 8x8 pixel rows scaled to [0, 1], and their labels."""
    if not uri:
        from sklearn.datasets import load_digits

        d = load_digits()
        return d.data / 16.0, d.target
    raw = mpijob_io.read(uri)
    if uri.endswith(".gz"):
        raw = gzip.decompress(raw)
    table = np.loadtxt(io.BytesIO(raw), delimiter=",")
    if table.ndim != 2 or table.shape[1] != 65:
        raise ValueError(f"{uri}: expected rows of 64 pixels and a label (scikit-learn's digits.csv.gz), got shape {table.shape}")
    return table[:, :64] / 16.0, table[:, 64].astype(int)


def split(n: int, seed: int, test_fraction: float = 0.2) -> tuple[np.ndarray, np.ndarray]:
    order = np.random.default_rng(seed).permutation(n)
    cut = int(n * (1 - test_fraction))
    return order[:cut], order[cut:]


def init(rng: np.random.Generator, d_in: int, hidden: int, d_out: int) -> dict[str, np.ndarray]:
    return {
        "w1": rng.normal(0, np.sqrt(2.0 / d_in), (d_in, hidden)),
        "b1": np.zeros(hidden),
        "w2": rng.normal(0, np.sqrt(2.0 / hidden), (hidden, d_out)),
        "b2": np.zeros(d_out),
    }


def forward(p: dict[str, np.ndarray], x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    h = np.maximum(x @ p["w1"] + p["b1"], 0.0)
    z = h @ p["w2"] + p["b2"]
    z -= z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return h, e / e.sum(axis=1, keepdims=True)


def grads(p: dict[str, np.ndarray], x: np.ndarray, y: np.ndarray) -> tuple[dict[str, np.ndarray], float]:
    """Summed (not averaged) gradients and loss of cross-entropy over x."""
    h, prob = forward(p, x)
    loss = float(-np.log(prob[np.arange(len(y)), y] + 1e-12).sum())
    dz = prob.copy()
    dz[np.arange(len(y)), y] -= 1.0
    g = {"w2": h.T @ dz, "b2": dz.sum(axis=0)}
    dh = (dz @ p["w2"].T) * (h > 0)
    g["w1"], g["b1"] = x.T @ dh, dh.sum(axis=0)
    return g, loss


def accuracy(p: dict[str, np.ndarray], x: np.ndarray, y: np.ndarray) -> float:
    return float((forward(p, x)[1].argmax(axis=1) == y).mean())


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    print(f"rank {rank} of {size} on {socket.gethostname()}", flush=True)

    output = os.environ.get("MPIJOB_OUTPUT_URI", "") if args.output == "from-env" else args.output
    if args.output == "from-env" and not output:
        print("--output from-env: $MPIJOB_OUTPUT_URI is not set (the job has no data connection or PVC)", file=sys.stderr, flush=True)
        return 2
    x, y = None, None
    if rank == 0:  # one rank reads the data; the others get it over MPI
        x, y = load(args.data)
    x, y = comm.bcast((x, y), root=0)
    train, test = split(len(y), args.seed)
    params = init(np.random.default_rng(args.seed), x.shape[1], args.hidden, 10)
    names = sorted(params)
    flat = np.concatenate([params[k].ravel() for k in names])
    comm.Bcast(flat, root=0)  # every rank starts from rank 0's weights

    shuffle = np.random.default_rng(args.seed + 1)
    steps_per_epoch = int(np.ceil(len(train) / args.batch_size))
    place = os.environ.get(checkpoint.CHECKPOINT_ENV, "") if args.checkpoint == "from-env" else ("" if args.checkpoint == "none" else args.checkpoint)
    stop = checkpoint.StopOnSignal()
    # Where to start: after the epochs (and steps) of the newest checkpoint.
    done_epochs, done_steps, resumed = 0, 0, None
    if place or os.environ.get(checkpoint.RESUME_ENV):
        like = {"model": params}
        got = checkpoint.load_on_rank0(rank, lambda o: comm.bcast(o, root=0), place or None, like=like)
        if got is not None:
            for k in names:
                params[k] = np.array(got.state["model"][k], dtype=np.float64)
            shuffle.bit_generator.state = got.state["shuffle"]
            done_epochs, done_steps, resumed = got.epoch, got.step, got
            if rank == 0:
                print(f"resumed from epoch {got.epoch}, step {got.step} of {args.epochs} epochs: {got.uri} "
                      f"(written {got.age_seconds():.0f}s ago)", flush=True)
                mpijob_io.progress(epoch=got.epoch, total_epochs=args.epochs, step=got.epoch * steps_per_epoch + got.step,
                                   total_steps=args.epochs * steps_per_epoch, resumed=checkpoint.resumed_report(got))

    def save(epochs: int, steps: int, before_epoch: dict) -> None:
        if rank == 0 and place:
            c = checkpoint.save({"model": params, "shuffle": before_epoch, "total_loss": total_loss},
                                epoch=epochs, step=steps, total_epochs=args.epochs, uri=place)
            print(f"checkpoint written: epoch {epochs}, step {steps}: {c.uri}", flush=True)

    start = time.monotonic()
    total_loss = 0.0
    times = mpijob_io.StepTimes()
    for epoch in range(done_epochs + 1, args.epochs + 1):
        if epoch == args.fail_once_at_epoch and resumed is None and rank == min(1, size - 1):
            print(f"rank {rank}: failing at the start of epoch {epoch} as --fail-once-at-epoch asks", file=sys.stderr, flush=True)
            comm.Abort(1)
        epoch_start = time.monotonic()
        before_epoch = shuffle.bit_generator.state
        order = train[shuffle.permutation(len(train))]
        first = 0
        if epoch == done_epochs + 1 and done_steps:
            first, total_loss = done_steps, float(resumed.state.get("total_loss", 0.0))
        else:
            total_loss = 0.0
        for s in range(first, steps_per_epoch):
            if stop.requested(comm):
                save(epoch - 1, s, before_epoch)
                stop.finish(comm)
                print(f"rank {rank}: stopped by SIGTERM at epoch {epoch}, step {s}; the checkpoint has it", file=sys.stderr, flush=True)
                return 143
            batch = order[s * args.batch_size : (s + 1) * args.batch_size]
            mine = batch[rank::size]  # this rank's share of the global batch
            local = np.zeros_like(flat)
            loss = 0.0
            with times:  # this rank's own work, not the wait in the Allreduce
                if len(mine):
                    g, loss = grads(params, x[mine], y[mine])
                    local = np.concatenate([g[k].ravel() for k in names])
            summed = np.empty_like(local)
            comm.Allreduce(local, summed, op=MPI.SUM)
            total_loss += comm.allreduce(loss, op=MPI.SUM)
            offset = 0
            for k in names:
                n = params[k].size
                params[k] -= args.lr * summed[offset : offset + n].reshape(params[k].shape) / len(batch)
                offset += n
            if args.epoch_seconds:
                time.sleep(max(0.0, epoch_start + args.epoch_seconds * (s + 1) / steps_per_epoch - time.monotonic()))
        if epoch % args.checkpoint_every == 0 or epoch == args.epochs:
            save(epoch, 0, shuffle.bit_generator.state)
        every = times.gather(comm)  # each rank's step time, to rank 0 (a collective)
        if rank == 0:
            acc = accuracy(params, x[test], y[test])
            elapsed = time.monotonic() - start
            eta = elapsed / (epoch - done_epochs) * (args.epochs - epoch)
            loss = total_loss / len(train)
            print(
                f"epoch {epoch}/{args.epochs} loss {loss:.4f} "
                f"test accuracy {acc:.4f} elapsed {elapsed:.1f}s eta {eta:.1f}s",
                flush=True,
            )
            mpijob_io.progress(epoch=epoch, total_epochs=args.epochs, loss=round(loss, 6), accuracy=round(acc, 6), eta_seconds=round(eta, 1),
                               rank_step_seconds=every)

    if rank != 0:
        return 0
    acc = accuracy(params, x[test], y[test])
    seconds = time.monotonic() - start
    print(f"test accuracy {acc:.4f} on {len(test)} digits after {args.epochs} epochs, {size} ranks, {seconds:.1f}s", flush=True)
    if output:
        buf = io.BytesIO()
        np.savez(buf, **params)
        where = mpijob_io.write(output, "model.npz", buf.getvalue())
        metrics = {"accuracy": acc, "epochs": args.epochs, "ranks": size, "seconds": round(seconds, 3), "seed": args.seed,
                   "hidden": args.hidden, "data": args.data or "sklearn",
                   # The test split, so the model can be scored again outside the job.
                   "test_indices": [int(i) for i in test]}
        mpijob_io.write(output, "metrics.json", json.dumps(metrics, indent=2).encode())
        print(f"model and metrics written to {where.rsplit('/', 1)[0]}/", flush=True)
    if acc < args.min_accuracy:
        print(f"test accuracy {acc:.4f} is below --min-accuracy {args.min_accuracy}", file=sys.stderr, flush=True)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
