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
    start = time.monotonic()
    for epoch in range(1, args.epochs + 1):
        order = train[shuffle.permutation(len(train))]
        total_loss = 0.0
        for s in range(steps_per_epoch):
            batch = order[s * args.batch_size : (s + 1) * args.batch_size]
            mine = batch[rank::size]  # this rank's share of the global batch
            local = np.zeros_like(flat)
            loss = 0.0
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
        if rank == 0:
            acc = accuracy(params, x[test], y[test])
            elapsed = time.monotonic() - start
            eta = elapsed / epoch * (args.epochs - epoch)
            loss = total_loss / len(train)
            print(
                f"epoch {epoch}/{args.epochs} loss {loss:.4f} "
                f"test accuracy {acc:.4f} elapsed {elapsed:.1f}s eta {eta:.1f}s",
                flush=True,
            )
            mpijob_io.progress(epoch=epoch, total_epochs=args.epochs, loss=round(loss, 6), accuracy=round(acc, 6), eta_seconds=round(eta, 1))

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
