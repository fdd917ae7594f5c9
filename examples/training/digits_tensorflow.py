"""Data-parallel TensorFlow over MPI: a Keras model, gradients averaged with MPI_Allreduce.

A small Keras network learns scikit-learn's bundled handwritten digits
(1,797 8x8 images, shipped with the package: nothing is fetched). Every
rank builds the same model from rank 0's weights; each step every rank
computes the gradient of its share of the global batch with
tf.GradientTape, MPI_Allreduce (mpi4py) sums the gradients, and every rank
applies the same averaged update with the same optimizer. The MPI is the
image's: Intel MPI in ghcr.io/mpijob/intel-tensorflow (mpi-intel), or any
other whose mpi4py the image carries.

Run it as an MPI job on Intel MPI:

    kubectl mpijob create tf --runtime mpi-intel --image ghcr.io/mpijob/intel-tensorflow:2.20 \\
        --workers 2 --slots-per-worker 2 --memory 2Gi -- \\
        mpijob-mpiexec python3 /opt/mpijob/examples/digits_tensorflow.py

Rank 0 prints the test accuracy each epoch ("test accuracy 0.9xxx"), a
progress report per epoch (docs/progress.md) and, with --output, writes the
model (model.keras) and metrics.json there: a folder, file:///path,
s3://BUCKET/PREFIX/, or from-env ($MPIJOB_OUTPUT_URI). It exits 3 when the
final test accuracy is below --min-accuracy (0.95).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
import time

# TensorFlow's start-up chatter (oneDNN notices) stays out of the ranks' logs.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpijob_io

try:  # in mpijob's images, next to this file
    import mpijob_checkpoint as checkpoint
except ImportError:  # the SDK's copy
    from mpijob import checkpoint


class UsageError(Exception):
    """A flag's value that cannot work: the message names the flag, the value and the fix."""


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=64, help="global batch, split over the ranks")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0,
                   help="TensorFlow threads per rank (default: the Worker's cores shared by its ranks)")
    p.add_argument("--checkpoint", default="from-env", help="checkpoint place: from-env ($MPIJOB_CHECKPOINT_URI, none when unset), a folder URI, or none")
    p.add_argument("--output", default="", help="folder for model.keras and metrics.json (rank 0): a path, file:///path, s3://BUCKET/PREFIX/, or from-env ($MPIJOB_OUTPUT_URI)")
    p.add_argument("--min-accuracy", type=float, default=0.95, help="exit 3 when the final test accuracy is lower (a fraction: 0.95)")
    return p.parse_args(argv)


def check(args: argparse.Namespace, size: int) -> None:
    """Values that cannot work, said before anything runs."""
    if args.epochs < 1:
        raise UsageError(f"--epochs {args.epochs}: must be at least 1")
    if args.batch_size < size:
        raise UsageError(f"--batch-size {args.batch_size}: smaller than the {size} ranks, so some ranks get no sample; use at least {size}")
    if args.lr <= 0:
        raise UsageError(f"--lr {args.lr}: must be above 0 (0.05 is the default)")
    if args.hidden < 1:
        raise UsageError(f"--hidden {args.hidden}: must be at least 1")
    if args.threads < 0:
        raise UsageError(f"--threads {args.threads}: must be 0 (automatic) or more")
    if not 0 <= args.min_accuracy <= 1:
        raise UsageError(f"--min-accuracy {args.min_accuracy}: a fraction between 0 and 1 (0.95, not 95)")


def split(n: int, seed: int, test_fraction: float = 0.2) -> tuple[np.ndarray, np.ndarray]:
    order = np.random.default_rng(seed).permutation(n)
    cut = int(n * (1 - test_fraction))
    return order[:cut], order[cut:]


def main(argv: list[str]) -> int:
    from mpi4py import MPI

    args = parse_args(argv)
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    try:
        check(args, size)
    except UsageError as e:
        # Every rank says it, so the reason is in every rank's log.
        print(f"digits_tensorflow.py: {e}", file=sys.stderr, flush=True)
        return 2
    output = os.environ.get("MPIJOB_OUTPUT_URI", "") if args.output == "from-env" else args.output
    if args.output == "from-env" and not output:
        print("--output from-env: $MPIJOB_OUTPUT_URI is not set (the job has no data connection or PVC)", file=sys.stderr, flush=True)
        return 2

    # The ranks of one Worker share its cores.
    local = comm.Split_type(MPI.COMM_TYPE_SHARED).Get_size()
    threads = args.threads or max(1, (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1) // local)
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    print(f"rank {rank} of {size} on {socket.gethostname()}: TensorFlow {tf.__version__}, MPI {MPI.Get_library_version().splitlines()[0].strip()}, {threads} threads", flush=True)

    x, y = None, None
    if rank == 0:  # one rank reads the data; the others get it over MPI
        from sklearn.datasets import load_digits

        d = load_digits()
        x, y = (d.data / 16.0).astype("float32"), d.target.astype("int64")
    x, y = comm.bcast((x, y), root=0)
    train, test = split(len(y), args.seed)

    tf.keras.utils.set_random_seed(args.seed)
    model = tf.keras.Sequential([
        tf.keras.Input(shape=(64,)),
        tf.keras.layers.Dense(args.hidden, activation="relu"),
        tf.keras.layers.Dense(10),
    ])
    # Every rank starts from rank 0's weights.
    model.set_weights([comm.bcast(w, root=0) for w in model.get_weights()])
    optimizer = tf.keras.optimizers.SGD(learning_rate=args.lr, momentum=0.9)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="sum")
    shapes = [v.shape for v in model.trainable_variables]
    sizes = [int(np.prod(s)) for s in shapes]

    @tf.function
    def local_gradients(xb: tf.Tensor, yb: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        with tf.GradientTape() as tape:
            loss = loss_fn(yb, model(xb, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        return tf.concat([tf.reshape(g, [-1]) for g in grads], axis=0), loss

    def accuracy(idx: np.ndarray) -> float:
        logits = model(x[idx], training=False).numpy()
        return float((logits.argmax(axis=1) == y[idx]).mean())

    shuffle = np.random.default_rng(args.seed + 1)
    steps_per_epoch = int(np.ceil(len(train) / args.batch_size))
    summed = np.empty(sum(sizes), dtype="float32")
    # Checkpoints (docs/training.md, "Checkpoints and resume"): the weights,
    # the optimizer's variables (momentum, iterations), epoch, step and the
    # data order's random state.
    place = os.environ.get(checkpoint.CHECKPOINT_ENV, "") if args.checkpoint == "from-env" else ("" if args.checkpoint == "none" else args.checkpoint)
    if place or os.environ.get(checkpoint.RESUME_ENV):
        optimizer.build(model.trainable_variables)  # its variables exist before the first step, to save or restore
    stop = checkpoint.StopOnSignal()
    done_epochs, done_steps, resumed_loss = 0, 0, 0.0
    if place or os.environ.get(checkpoint.RESUME_ENV):
        got = checkpoint.load_on_rank0(rank, lambda o: comm.bcast(o, root=0), place or None, like={"model": model.get_weights()})
        if got is not None:
            model.set_weights(got.state["model"])
            for v, a in zip(optimizer.variables, got.state["optimizer"], strict=True):
                v.assign(a)
            shuffle.bit_generator.state = got.state["shuffle"]
            done_epochs, done_steps, resumed_loss = got.epoch, got.step, float(got.state.get("total_loss", 0.0))
            if rank == 0:
                print(f"resumed from epoch {got.epoch}, step {got.step} of {args.epochs} epochs: {got.uri} (written {got.age_seconds():.0f}s ago)", flush=True)
                mpijob_io.progress(epoch=got.epoch, total_epochs=args.epochs, step=got.epoch * steps_per_epoch + got.step,
                                   total_steps=args.epochs * steps_per_epoch, resumed=checkpoint.resumed_report(got))

    def save(epochs: int, step: int, before_epoch: dict, total_loss: float) -> None:
        if rank == 0 and place:
            c = checkpoint.save({"model": model.get_weights(), "optimizer": [v.numpy() for v in optimizer.variables],
                                 "shuffle": before_epoch, "total_loss": total_loss},
                                epoch=epochs, step=step, total_epochs=args.epochs, uri=place)
            print(f"checkpoint written: epoch {epochs}, step {step}: {c.uri}", flush=True)

    start = time.monotonic()
    acc = 0.0
    for epoch in range(done_epochs + 1, args.epochs + 1):
        before_epoch = shuffle.bit_generator.state
        order = train[shuffle.permutation(len(train))]
        first, total_loss = 0, 0.0
        if epoch == done_epochs + 1 and done_steps:
            first, total_loss = done_steps, resumed_loss
        for s in range(first, steps_per_epoch):
            if place and stop.requested(comm):
                save(epoch - 1, s, before_epoch, total_loss)
                stop.finish(comm)
                print(f"rank {rank}: stopped by SIGTERM at epoch {epoch}, step {s}; the checkpoint has it", file=sys.stderr, flush=True)
                return 143
            batch = order[s * args.batch_size : (s + 1) * args.batch_size]
            mine = batch[rank::size]  # this rank's share of the global batch
            if len(mine):
                flat, loss = local_gradients(tf.constant(x[mine]), tf.constant(y[mine]))
                flat, loss = flat.numpy(), float(loss)
            else:
                flat, loss = np.zeros_like(summed), 0.0
            comm.Allreduce(flat, summed, op=MPI.SUM)
            total_loss += comm.allreduce(loss, op=MPI.SUM)
            mean = summed / len(batch)
            grads, offset = [], 0
            for shape, n in zip(shapes, sizes, strict=True):
                grads.append(tf.constant(mean[offset : offset + n].reshape(shape)))
                offset += n
            optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        save(epoch, 0, shuffle.bit_generator.state, 0.0)
        if rank == 0:
            acc = accuracy(test)
            elapsed = time.monotonic() - start
            eta = elapsed / (epoch - done_epochs) * (args.epochs - epoch)
            loss = total_loss / len(train)
            print(f"epoch {epoch}/{args.epochs} loss {loss:.4f} test accuracy {acc:.4f} elapsed {elapsed:.1f}s eta {eta:.1f}s", flush=True)
            mpijob_io.progress(epoch=epoch, total_epochs=args.epochs, loss=round(loss, 6), accuracy=round(acc, 6), eta_seconds=round(eta, 1))
    if done_epochs >= args.epochs and rank == 0:
        acc = accuracy(test)

    # The ranks applied the same updates: their weights agree.
    mine_sum = float(sum(np.abs(w).sum() for w in model.get_weights()))
    sums = comm.gather(mine_sum, root=0)
    if rank != 0:
        return 0
    spread = max(sums) - min(sums)
    seconds = time.monotonic() - start
    print(f"test accuracy {acc:.4f} on {len(test)} digits after {args.epochs} epochs, {size} ranks, {seconds:.1f}s; weights agree across ranks within {spread:.2e}", flush=True)
    if output:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "model.keras")
            model.save(path)
            with open(path, "rb") as f:
                where = mpijob_io.write(output, "model.keras", f.read())
        metrics = {"accuracy": acc, "epochs": args.epochs, "ranks": size, "seconds": round(seconds, 3), "seed": args.seed,
                   "hidden": args.hidden, "framework": f"tensorflow {tf.__version__}", "mpi": MPI.Get_library_version().splitlines()[0].strip(),
                   "test_indices": [int(i) for i in test]}
        mpijob_io.write(output, "metrics.json", json.dumps(metrics, indent=2).encode())
        print(f"model and metrics written to {where.rsplit('/', 1)[0]}/", flush=True)
    if acc < args.min_accuracy:
        print(f"test accuracy {acc:.4f} is below --min-accuracy {args.min_accuracy}", file=sys.stderr, flush=True)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
