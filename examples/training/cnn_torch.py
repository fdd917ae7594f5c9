"""A compute-bound, data-parallel CNN in PyTorch: the workload that gets faster with more ranks.

Every rank holds the same convolutional model (rank 0's initial weights,
broadcast), trains on its share of each step's samples, and the gradients
are summed across the ranks in one flat buffer every step:

- on CPUs with MPI_Allreduce (mpi4py), whatever MPI launched the ranks;
- on GPUs with torch.distributed over NCCL, one GPU per rank, with the rank,
  the world size and the local rank read from the MPI launcher's environment
  (Open MPI, MPICH/Hydra and Intel MPI name them differently) and the
  rendezvous address from $MASTER_ADDR/$MASTER_PORT or, when unset, rank 0's
  address sent to every rank over MPI.

Two modes:

- ``--mode accuracy`` learns handwritten digits: scikit-learn's 8x8 digits
  (nothing is fetched) upsampled to 32x32 and augmented (rotated, scaled,
  shifted, noised) into --samples training images; the test images are the
  held-out digits, upsampled and not augmented. The global batch is fixed and
  split over the ranks, so with one seed 1, 2, 4 and 8 ranks take the same
  steps and reach the same accuracy, up to the order in which floating-point
  sums are taken. Rank 0 prints a progress report per epoch
  (docs/progress.md), writes a checkpoint each epoch to $MPIJOB_CHECKPOINT_URI
  (and once more on SIGTERM) and resumes from the newest one at start
  (docs/training.md, "Checkpoints and resume"), writes model.pt and
  metrics.json at the end to --output, and exits 3 below --target-accuracy.
- ``--mode throughput`` trains on synthetic 3x32x32 images, --batch-per-rank
  images per rank per step (weak scaling: more ranks, more samples per
  step), and prints samples/s in total and per rank, the share of each step
  spent in the allreduce, and the scaling efficiency against one rank alone
  (measured in the same run: rank 0 first trains alone while the others
  wait, unless --baseline gives a figure). Its last line is
  ``MPIJOB_THROUGHPUT {json}`` for benchmarks (bench/training).

    kubectl mpijob create cnn --workers 2 --slots-per-worker 2 -- \\
        mpirun python3 /opt/mpijob/examples/cnn_torch.py --mode accuracy --output from-env

docs/training.md ("Scale your script") shows what it measured.
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
from collections.abc import Callable, Mapping

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpijob_io

try:  # in mpijob's images, next to this file
    import mpijob_checkpoint as checkpoint
except ImportError:  # the SDK's copy
    from mpijob import checkpoint

THROUGHPUT_PREFIX = "MPIJOB_THROUGHPUT "

# Where each MPI launcher puts a process's rank, the number of ranks and the
# rank among those on the same node (torchrun's names first).
RANK_VARS = ("RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK")
SIZE_VARS = ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE")
LOCAL_RANK_VARS = ("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "PMI_LOCAL_RANK")


class UsageError(Exception):
    """A flag's value that cannot work: the message names it and the fix."""


def launcher_env(env: Mapping[str, str]) -> tuple[int, int, int]:
    """Rank, world size and local rank from the launcher's environment.

    One process started without a launcher is rank 0 of 1.
    """

    def first(names: tuple[str, ...], default: int) -> int:
        for n in names:
            v = env.get(n, "")
            if v != "":
                try:
                    return int(v)
                except ValueError:
                    raise UsageError(f"${n}={v!r} is not a number: the launcher's environment is not what this program expects") from None
        return default

    rank, size = first(RANK_VARS, 0), first(SIZE_VARS, 1)
    local = first(LOCAL_RANK_VARS, 0 if size == 1 else -1)
    if local < 0:
        # A launcher that names no local rank: assume one rank per node.
        local = 0
    if not 0 <= rank < size:
        raise UsageError(f"rank {rank} is outside a world of {size} ranks: check the launcher's environment ({', '.join(RANK_VARS + SIZE_VARS)})")
    return rank, size, local


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--mode", choices=("accuracy", "throughput"), default="accuracy")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto", help="auto: a GPU per rank when this PyTorch sees one, else the CPU")
    p.add_argument("--width", type=int, default=32, help="channels of the first convolutions (the model's size; work per sample grows with its square)")
    p.add_argument("--threads", type=int, default=1, help="CPU threads per rank (one core per rank by default: ranks share a Worker's cores)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--lr", type=float, default=0.02)
    # accuracy mode
    p.add_argument("--samples", type=int, default=6000, help="accuracy: training images made from the digits")
    p.add_argument("--epochs", type=int, default=3, help="accuracy: passes over the training images")
    p.add_argument("--global-batch", type=int, default=64, help="accuracy: images per step, split over the ranks")
    p.add_argument("--precision", choices=("float32", "float64"), default="float32",
                   help="accuracy: float64 makes 1, 2, 4 and 8 ranks agree to many more digits (sums taken in another order differ less), at about half the speed")
    p.add_argument("--target-accuracy", type=float, default=0.95, help="accuracy: exit 3 when the test accuracy is lower")
    p.add_argument("--output", default="",
                   help="accuracy: folder for model.pt and metrics.json (rank 0): a path, s3://BUCKET/PREFIX/ or from-env ($MPIJOB_OUTPUT_URI)")
    p.add_argument("--checkpoint", default="from-env",
                   help="accuracy: checkpoint place: from-env ($MPIJOB_CHECKPOINT_URI, none when unset), a folder URI, or none")
    p.add_argument("--checkpoint-every", type=int, default=1, help="accuracy: write a checkpoint every N epochs (and once more on SIGTERM)")
    # throughput mode
    p.add_argument("--batch-per-rank", type=int, default=64, help="throughput: images per rank per step")
    p.add_argument("--steps", type=int, default=30, help="throughput: timed steps")
    p.add_argument("--warmup", type=int, default=5, help="throughput: steps before timing")
    p.add_argument("--baseline", type=float, default=0.0, help="throughput: samples/s of one rank alone, for the efficiency (default: measured in this run)")
    p.add_argument("--baseline-steps", type=int, default=0, help="throughput: steps rank 0 trains alone to measure one rank (default: --steps/3, at least 5)")
    p.add_argument("--overlap", action="store_true",
                   help="CPU ranks: sum each bucket of gradients (nonblocking MPI_Iallreduce) as soon as backward has made it, while backward goes on (what DDP and Horovod do)")
    p.add_argument("--alone", action="store_true",
                   help="throughput: no rank sums gradients or waits for another: what the cores give with no communication (the efficiency's ceiling)")
    p.add_argument("--bucket-mb", type=float, default=1.0, help="--overlap: megabytes of gradients per bucket")
    return p.parse_args(argv)


def check(args: argparse.Namespace, size: int) -> None:
    """Refuse values that cannot work, naming the flag, the value and the fix."""
    positive = ["width", "threads"] + (["samples", "epochs", "global_batch"] if args.mode == "accuracy" else ["batch_per_rank", "steps"])
    for name in positive:
        v = getattr(args, name)
        if v <= 0:
            raise UsageError(f"--{name.replace('_', '-')} {v}: must be 1 or more")
    if args.mode == "accuracy":
        if args.global_batch < size:
            raise UsageError(
                f"--global-batch {args.global_batch} is smaller than the {size} ranks: each step's images are split over the ranks, "
                f"so every rank needs at least one; use --global-batch {size} or more (a multiple of {size} splits evenly)"
            )
        if args.global_batch > args.samples:
            raise UsageError(f"--global-batch {args.global_batch} is larger than --samples {args.samples}: one step would take every image; lower it or raise --samples")
        if not 0.0 <= args.target_accuracy <= 1.0:
            raise UsageError(f"--target-accuracy {args.target_accuracy}: a fraction between 0 and 1 (0.95 is 95 %)")
    if args.alone and args.overlap:
        raise UsageError("--alone and --overlap: --alone sums nothing, so there is nothing to overlap; drop one")
    if args.overlap and args.bucket_mb <= 0:
        raise UsageError(f"--bucket-mb {args.bucket_mb}: must be more than 0 (1 sums a megabyte of gradients at a time)")
    if args.warmup < 0 or args.baseline < 0 or args.baseline_steps < 0:
        raise UsageError("--warmup, --baseline and --baseline-steps cannot be negative")


def model(torch, channels: int, width: int):
    """Four 3x3 convolutions and two dense layers, He-initialised.

    Most of the work is in the convolutions, most of the weights (and so of
    the gradients summed each step: 2.4 MB at --width 32) in the first dense
    layer (docs/training.md). No batch norm: a rank's share of a batch would
    change it.
    """
    nn = torch.nn
    w = width
    net = nn.Sequential(
        nn.Conv2d(channels, w, 3, padding=1), nn.ReLU(),
        nn.Conv2d(w, w, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),  # 16x16
        nn.Conv2d(w, 2 * w, 3, padding=1), nn.ReLU(),
        nn.Conv2d(2 * w, 2 * w, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),  # 8x8
        nn.Flatten(), nn.Linear(2 * w * 8 * 8, 128), nn.ReLU(), nn.Linear(128, 10),
    )
    for m in net.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
            nn.init.zeros_(m.bias)
    return net


def digits32(torch, samples: int, seed: int):
    """Training images made from the digits' training split, and the test split, at 32x32."""
    import numpy as np
    from sklearn.datasets import load_digits

    d = load_digits()
    x = torch.tensor(d.data / 16.0, dtype=torch.float32).reshape(-1, 1, 8, 8)
    y = torch.tensor(d.target, dtype=torch.long)
    order = np.random.default_rng(seed).permutation(len(y))
    cut = int(len(y) * 0.8)
    train, test = torch.from_numpy(order[:cut]), torch.from_numpy(order[cut:])
    up = torch.nn.functional.interpolate(x, size=(32, 32), mode="bilinear", align_corners=False)

    g = torch.Generator().manual_seed(seed + 1)
    pick = train[torch.randint(len(train), (samples,), generator=g)]
    angle = (torch.rand(samples, generator=g) - 0.5) * (2 * math.pi * 15 / 180)  # +-15 degrees
    scale = 0.9 + 0.2 * torch.rand(samples, generator=g)
    shift = (torch.rand(samples, 2, generator=g) - 0.5) * 0.25  # +-4 pixels of 32
    cos, sin = torch.cos(angle) / scale, torch.sin(angle) / scale
    theta = torch.stack([torch.stack([cos, -sin, shift[:, 0]], 1), torch.stack([sin, cos, shift[:, 1]], 1)], 1)
    xs = []
    for lo in range(0, samples, 2048):  # in chunks: bounded memory
        hi = min(samples, lo + 2048)
        grid = torch.nn.functional.affine_grid(theta[lo:hi], [hi - lo, 1, 32, 32], align_corners=False)
        xs.append(torch.nn.functional.grid_sample(up[pick[lo:hi]], grid, align_corners=False))
    xtrain = torch.cat(xs) + 0.05 * torch.randn(samples, 1, 32, 32, generator=g)
    mean, std = 0.3, 0.32  # about the digits' own: inputs centred on 0
    return (xtrain - mean) / std, y[pick], (up[test] - mean) / std, y[test]


class Reducer:
    """Sums tensors across the ranks: MPI on CPUs, NCCL on GPUs, nothing for one rank."""

    def __init__(self, torch, comm, rank: int, size: int, device, env: Mapping[str, str]):
        self.torch, self.comm, self.rank, self.size, self.device = torch, comm, rank, size, device
        self.nccl = device.type == "cuda" and size > 1
        if self.nccl:
            import torch.distributed as dist

            addr, port = env.get("MASTER_ADDR", ""), env.get("MASTER_PORT", "")
            if not addr:
                if comm is None:
                    raise UsageError("$MASTER_ADDR is not set and mpi4py is missing: set MASTER_ADDR and MASTER_PORT to rank 0's address")
                if rank == 0:
                    s = socket.socket()
                    s.bind(("", 0))
                    port = str(s.getsockname()[1])
                    s.close()
                    addr = socket.gethostbyname(socket.gethostname())
                addr, port = comm.bcast((addr, port), root=0)
            dist.init_process_group("nccl", init_method=f"tcp://{addr}:{port or 29500}", rank=rank, world_size=size)
            self.dist = dist

    def sum_(self, flat):
        """Sum flat (a 1-D tensor on the device) over the ranks, in place."""
        if self.size == 1:
            return flat
        if self.nccl:
            self.dist.all_reduce(flat)
            return flat
        from mpi4py import MPI

        self.comm.Allreduce(MPI.IN_PLACE, flat.numpy(), op=MPI.SUM)
        return flat

    def broadcast_(self, flat):
        if self.size == 1:
            return flat
        if self.nccl:
            self.dist.broadcast(flat, src=0)
        else:
            self.comm.Bcast(flat.numpy(), root=0)
        return flat

    def wait_for_rank0(self, work: Callable[[], float]) -> float:
        """Rank 0 runs work() alone while the others wait without spinning; every rank gets its result."""
        result = work() if self.rank == 0 else 0.0
        if self.size == 1:
            return result
        if self.comm is not None:
            req = self.comm.Ibarrier()
            while not req.Test():
                time.sleep(0.005)
            return self.comm.bcast(result, root=0)
        t = self.torch.tensor([result], dtype=self.torch.float64, device=self.device)
        self.dist.broadcast(t, src=0)  # NCCL ranks each have their own GPU: waiting costs no CPU time
        return float(t.item())

    def close(self) -> None:
        if self.nccl:
            self.dist.destroy_process_group()


def flat_grads(torch, params):
    return torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params])


def set_grads(params, flat, scale: float) -> None:
    offset = 0
    for p in params:
        n = p.numel()
        p.grad = flat[offset : offset + n].view_as(p).mul_(scale)
        offset += n


class Overlap:
    """Sums gradients bucket by bucket while backward still runs, on CPUs over MPI.

    Every parameter's gradient is a view into one flat buffer laid out in the
    order backward makes them (the last layer first). Once all of a bucket's
    gradients are in, its MPI_Iallreduce starts, and each later gradient
    tests the sums in flight (MPI progresses them only inside MPI calls).
    Buckets start strictly in their order, on every rank alike, as MPI's
    nonblocking collectives require. wait() starts whatever has not started
    (a rank with no images this step ran no backward), finishes the sums and
    scales them.
    """

    def __init__(self, torch, comm, params: list, bucket_bytes: int):
        from mpi4py import MPI

        self.MPI, self.comm = MPI, comm
        order = list(reversed(params))
        self.flat = torch.zeros(sum(p.numel() for p in params), dtype=params[0].dtype)
        self.bounds: list[tuple[int, int]] = []
        self.bucket_of: dict[int, int] = {}
        self.members: list[int] = []
        offset, lo, count = 0, 0, 0
        for p in order:
            n = p.numel()
            p.grad = self.flat[offset : offset + n].view_as(p)
            self.bucket_of[id(p)] = len(self.bounds)
            offset, count = offset + n, count + 1
            if (offset - lo) * self.flat.element_size() >= bucket_bytes or p is order[-1]:
                self.bounds.append((lo, offset))
                self.members.append(count)
                lo, count = offset, 0
        self.pending = list(self.members)
        self.started = 0  # buckets started, in order
        self.requests: list = []
        # The hook on each gradient's accumulator runs once the gradient is
        # in p.grad (Horovod's way; PyTorch 1.13, Debian's, lacks
        # register_post_accumulate_grad_hook).
        self.accumulators = []
        for p in params:
            acc = p.expand_as(p).grad_fn.next_functions[0][0]
            acc.register_hook(lambda *_, p=p: self._ready(p))
            self.accumulators.append(acc)

    def _start(self, upto: int) -> None:
        while self.started < upto:
            lo, hi = self.bounds[self.started]
            self.requests.append(self.comm.Iallreduce(self.MPI.IN_PLACE, self.flat[lo:hi].numpy(), op=self.MPI.SUM))
            self.started += 1

    def _ready(self, p) -> None:
        self.pending[self.bucket_of[id(p)]] -= 1
        done = self.started
        while done < len(self.pending) and self.pending[done] == 0:
            done += 1
        if done > self.started:
            self._start(done)
        elif self.requests:
            self.MPI.Request.Testall(self.requests)

    def wait(self, scale: float) -> None:
        """Finish every bucket's sum and multiply the gradients by scale."""
        self._start(len(self.bounds))
        self.MPI.Request.Waitall(self.requests)
        self.requests, self.started, self.pending = [], 0, list(self.members)
        self.flat.mul_(scale)


def overlapped(torch, args: argparse.Namespace, reducer: Reducer, params: list, device) -> Overlap | None:
    """--overlap's bucketed sums, where they apply: several CPU ranks over MPI."""
    if not args.overlap:
        return None
    if device.type != "cpu" or reducer.size == 1 or reducer.comm is None:
        if reducer.rank == 0:
            print("--overlap: only several CPU ranks over MPI sum in buckets; summing in one buffer after backward", flush=True)
        return None
    return Overlap(torch, reducer.comm, params, int(args.bucket_mb * 1e6))


def pick_device(torch, want: str, rank: int, local_rank: int):
    if want == "cpu" or (want == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu"), ""
    if not torch.cuda.is_available():
        why = (
            f"this PyTorch ({torch.__version__}) is built without CUDA"
            if torch.version.cuda is None
            else f"PyTorch {torch.__version__} finds no GPU (CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')!r})"
        )
        return None, (
            f"--device cuda: rank {rank} sees no GPU on {socket.gethostname()}: {why}. Run the job on a GPU runtime with GPUs per Worker "
            "(kubectl mpijob create --runtime mpi-openmpi-gpu --gpus 1), or use --device cpu (or auto)."
        )
    return torch.device("cuda", local_rank % torch.cuda.device_count()), ""


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    try:
        rank, size, local_rank = launcher_env(os.environ)
        check(args, size)
    except UsageError as e:
        # Every rank says it: whichever rank mpirun reports first, its last words are the reason.
        print(f"error: {e}", file=sys.stderr, flush=True)
        return 2

    import torch

    comm = None
    try:
        from mpi4py import MPI

        comm = MPI.COMM_WORLD
        if size > 1 and (comm.Get_rank(), comm.Get_size()) != (rank, size):
            print(f"error: the launcher's environment says rank {rank} of {size}, MPI says {comm.Get_rank()} of {comm.Get_size()}", file=sys.stderr, flush=True)
            return 2
    except ImportError:
        if size > 1 and args.device == "cpu":
            print("error: --device cpu with several ranks sums gradients with mpi4py, which this image lacks", file=sys.stderr, flush=True)
            return 2

    device, problem = pick_device(torch, args.device, rank, local_rank)
    # Every rank must agree before any waits on the others in a collective.
    bad = comm.allreduce(1 if problem else 0) if comm is not None and size > 1 else (1 if problem else 0)
    if bad:
        if problem:
            print(f"error: {problem}", file=sys.stderr, flush=True)
        return 2
    if device.type == "cpu":
        torch.set_num_threads(args.threads)
    else:
        torch.cuda.set_device(device)
        torch.backends.cudnn.benchmark = True
    print(f"rank {rank} of {size} on {socket.gethostname()}, {device.type}" + (f" ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else ""), flush=True)

    reducer = Reducer(torch, comm, rank, size, device, os.environ)
    try:
        if args.mode == "accuracy":
            return accuracy(torch, args, reducer, device)
        return throughput(torch, args, reducer, device)
    finally:
        reducer.close()


def same_start(torch, net, reducer: Reducer) -> list:
    params = list(net.parameters())
    flat = torch.cat([p.data.reshape(-1) for p in params])
    reducer.broadcast_(flat)
    offset = 0
    for p in params:
        n = p.numel()
        p.data.copy_(flat[offset : offset + n].view_as(p))
        offset += n
    return params


def sync(torch, device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def accuracy(torch, args, reducer: Reducer, device) -> int:
    rank, size = reducer.rank, reducer.size
    output = os.environ.get("MPIJOB_OUTPUT_URI", "") if args.output == "from-env" else args.output
    if args.output == "from-env" and not output:
        print("error: --output from-env: $MPIJOB_OUTPUT_URI is not set (the job has no data connection or PVC)", file=sys.stderr, flush=True)
        return 2
    torch.manual_seed(args.seed)
    t0 = time.monotonic()
    xtrain, ytrain, xtest, ytest = digits32(torch, args.samples, args.seed)
    if rank == 0:
        print(f"{args.samples} training images made from the digits in {time.monotonic() - t0:.1f}s; {len(ytest)} test images", flush=True)
    dtype = {"float32": torch.float32, "float64": torch.float64}[args.precision]
    xtrain, xtest = xtrain.to(device, dtype), xtest.to(device, dtype)
    ytrain, ytest = ytrain.to(device), ytest.to(device)
    net = model(torch, 1, args.width).to(device, dtype)
    params = same_start(torch, net, reducer)
    opt = torch.optim.SGD(params, lr=args.lr, momentum=0.9)
    overlap = overlapped(torch, args, reducer, params, device)
    loss_fn = torch.nn.CrossEntropyLoss(reduction="sum")
    gen = torch.Generator().manual_seed(args.seed + 2)
    steps = math.ceil(args.samples / args.global_batch)
    place = os.environ.get(checkpoint.CHECKPOINT_ENV, "") if args.checkpoint == "from-env" else ("" if args.checkpoint == "none" else args.checkpoint)
    stop = checkpoint.StopOnSignal()
    done_epochs, done_steps = 0, 0
    if place or os.environ.get(checkpoint.RESUME_ENV):
        # Rank 0 reads it and sends it to the others over MPI; NCCL ranks started without MPI read it each.
        like = {"model": net.state_dict()}
        if reducer.comm is not None and size > 1:
            got = checkpoint.load_on_rank0(rank, lambda o: reducer.comm.bcast(o, root=0), place or None, like=like)
        else:
            got = checkpoint.load_latest(place or None, like=like)
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

    def stop_requested() -> bool:
        flag = torch.tensor([1.0 if stop.got else 0.0], device=device, dtype=dtype)
        return bool(float(reducer.sum_(flag)[0]) > 0)

    def save(epochs: int, step: int, order_state) -> None:
        if rank == 0 and place:
            c = checkpoint.save({"model": net.state_dict(), "optimizer": opt.state_dict(), "order": order_state, "rng": checkpoint.rng_state()},
                                epoch=epochs, step=step, total_epochs=args.epochs, uri=place)
            print(f"checkpoint written: epoch {epochs}, step {step}: {c.uri}", flush=True)

    start = time.monotonic()
    acc = 0.0
    loss_avg = 0.0
    times = mpijob_io.StepTimes()
    for epoch in range(done_epochs + 1, args.epochs + 1):
        net.train()
        before_epoch = gen.get_state()
        order = torch.randperm(args.samples, generator=gen).to(device)
        total = torch.zeros(1, device=device, dtype=dtype)
        first = done_steps if epoch == done_epochs + 1 else 0
        for s in range(first, steps):
            if place and stop_requested():
                save(epoch - 1, s, before_epoch)
                stop_requested()  # every rank waits until the checkpoint is written
                print(f"rank {rank}: stopped by SIGTERM at epoch {epoch}, step {s}; the checkpoint has it", file=sys.stderr, flush=True)
                return 143
            batch = order[s * args.global_batch : (s + 1) * args.global_batch]
            mine = batch[rank::size]
            opt.zero_grad(set_to_none=False)
            with times:  # this rank's own work, not the wait for the others
                if len(mine):
                    loss = loss_fn(net(xtrain[mine]), ytrain[mine])
                    loss.backward()
                    total += loss.detach()
                sync(torch, device)
            # Sum over the ranks, divide by the global batch: every rank's loss is a sum.
            if overlap is not None:
                overlap.wait(1.0 / len(batch))
            else:
                flat = reducer.sum_(flat_grads(torch, params))
                set_grads(params, flat, 1.0 / len(batch))
            opt.step()
        net.eval()
        with torch.no_grad():
            share = torch.arange(rank, len(ytest), size, device=device)
            correct = (net(xtest[share]).argmax(1) == ytest[share]).sum().to(dtype)
            counts = reducer.sum_(torch.cat([correct.reshape(1), total]))
        acc = float(counts[0]) / len(ytest)
        loss_avg = float(counts[1]) / args.samples
        if epoch % args.checkpoint_every == 0 or epoch == args.epochs:
            save(epoch, 0, gen.get_state())
        # Each rank's step time, to rank 0 (a collective over MPI; none
        # under torchrun without mpi4py).
        every = times.gather(reducer.comm) if reducer.comm is not None and size > 1 else None
        if rank == 0:
            elapsed = time.monotonic() - start
            eta = elapsed / (epoch - done_epochs) * (args.epochs - epoch)
            print(f"epoch {epoch}/{args.epochs} loss {loss_avg:.4f} test accuracy {acc:.4f} elapsed {elapsed:.1f}s eta {eta:.1f}s", flush=True)
            mpijob_io.progress(epoch=epoch, total_epochs=args.epochs, loss=round(loss_avg, 6), accuracy=round(acc, 6), eta_seconds=round(eta, 1),
                               rank_step_seconds=every)

    if rank != 0:
        return 0
    seconds = time.monotonic() - start
    rate = args.samples * args.epochs / seconds
    print(f"test accuracy {acc:.4f} on {len(ytest)} digits after {args.epochs} epochs, {size} ranks, {seconds:.1f}s, {rate:.0f} samples/s", flush=True)
    if output:
        buf = io.BytesIO()
        torch.save(net.state_dict(), buf)
        where = mpijob_io.write(output, "model.pt", buf.getvalue())
        metrics = {"accuracy": acc, "loss": loss_avg, "epochs": args.epochs, "ranks": size, "device": device.type, "seconds": round(seconds, 3),
                   "samples_per_second": round(rate, 1), "samples": args.samples, "global_batch": args.global_batch, "width": args.width,
                   "seed": args.seed, "framework": f"torch {torch.__version__}"}
        mpijob_io.write(output, "metrics.json", json.dumps(metrics, indent=2).encode())
        print(f"model and metrics written to {where.rsplit('/', 1)[0]}/", flush=True)
    if acc < args.target_accuracy:
        print(f"test accuracy {acc:.4f} is below --target-accuracy {args.target_accuracy}: train longer (--epochs, --samples) or lower the target", file=sys.stderr, flush=True)
        return 3
    return 0


def throughput(torch, args, reducer: Reducer, device) -> int:
    rank, size = reducer.rank, reducer.size
    torch.manual_seed(args.seed)
    net = model(torch, 3, args.width).to(device)
    params = same_start(torch, net, reducer)
    opt = torch.optim.SGD(params, lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(args.seed + rank)
    pool = [(torch.randn(args.batch_per_rank, 3, 32, 32, generator=g).to(device), torch.randint(10, (args.batch_per_rank,), generator=g).to(device)) for _ in range(4)]
    nparams = sum(p.numel() for p in params)

    def compute(i: int) -> None:
        x, y = pool[i % len(pool)]
        opt.zero_grad(set_to_none=False)
        loss_fn(net(x), y).backward()

    def solo() -> float:
        n = args.baseline_steps or max(5, args.steps // 3)
        for i in range(2):
            compute(i)
            opt.step()
        sync(torch, device)
        t = time.perf_counter()
        for i in range(n):
            compute(i)
            opt.step()
        sync(torch, device)
        return n * args.batch_per_rank / (time.perf_counter() - t)

    baseline = args.baseline
    if not baseline and size > 1:
        if rank == 0:
            print(f"one rank alone first: rank 0 trains {args.baseline_steps or max(5, args.steps // 3)} steps while the others wait", flush=True)
        baseline = reducer.wait_for_rank0(solo)

    # After the baseline: rank 0's solo steps must not start sums the others never join.
    overlap = overlapped(torch, args, reducer, params, device)
    reduce_s = 0.0
    computed: list[float] = []  # this rank's compute time of each timed step
    for i in range(args.warmup + args.steps):
        if i == args.warmup:
            sync(torch, device)
            reducer.sum_(torch.zeros(1, device=device))  # every rank starts the clock together
            sync(torch, device)
            start = time.perf_counter()
        c0 = time.perf_counter()
        compute(i)
        sync(torch, device)
        r0 = time.perf_counter()
        if args.alone:
            pass
        elif overlap is not None:
            overlap.wait(1.0 / size)
        else:
            flat = reducer.sum_(flat_grads(torch, params))
            sync(torch, device)
            set_grads(params, flat, 1.0 / size)
        if i >= args.warmup:
            reduce_s += time.perf_counter() - r0
            computed.append(r0 - c0)
        opt.step()
        if rank == 0 and i >= args.warmup and (i - args.warmup + 1) % max(1, args.steps // 5) == 0:
            done = i - args.warmup + 1
            elapsed = time.perf_counter() - start
            mpijob_io.progress(step=done, total_steps=args.steps, eta_seconds=round(elapsed / done * (args.steps - done), 1))
    sync(torch, device)
    seconds = time.perf_counter() - start
    mine = args.steps * args.batch_per_rank / seconds  # this rank's own samples/s
    shares = reducer.sum_(torch.tensor([reduce_s, mine], dtype=torch.float64 if device.type == "cpu" else torch.float32, device=device))
    # Every rank's compute time per step, to rank 0: how long the fastest
    # ranks wait each step for the slowest (none without mpi4py, under torchrun).
    every = reducer.comm.gather(computed, root=0) if reducer.comm is not None and size > 1 else [computed]
    if rank != 0:
        return 0
    # --alone: no rank waits, so each has its own pace; the sum of them.
    total = float(shares[1]) if args.alone else args.steps * args.batch_per_rank * size / seconds
    if not baseline:
        baseline = total  # one rank: it is its own baseline
    means = [sum(c) / len(c) for c in every] if every else []
    straggle = sum(max(c[s] for c in every) - sum(c[s] for c in every) / len(every) for s in range(args.steps)) if every and len(every) > 1 and not args.alone else 0.0
    result = {
        "ranks": size,
        "device": device.type,
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "",
        "batch_per_rank": args.batch_per_rank,
        "width": args.width,
        "steps": args.steps,
        "seconds": round(seconds, 3),
        "samples_per_second": round(total, 1),
        "samples_per_second_per_rank": round(total / size, 1),
        "step_ms": round(1000 * seconds / args.steps, 2),
        "allreduce_share": round(float(shares[0]) / size / seconds, 4),
        "allreduce_mb": round(nparams * 4 / 1e6, 2),
        "overlap": overlap is not None,
        "alone": args.alone,
        # The allreduce's share is mostly this when ranks compute at different speeds.
        "waiting_for_slowest_share": round(straggle / seconds, 4),
        "compute_ms_fastest_rank": round(1000 * min(means), 2) if means else None,
        "compute_ms_slowest_rank": round(1000 * max(means), 2) if means else None,
        "one_rank_samples_per_second": round(baseline, 1),
        "efficiency": round(total / (size * baseline), 3),
        "threads_per_rank": args.threads if device.type == "cpu" else 0,
        "framework": f"torch {torch.__version__}",
    }
    print(f"{'ranks':>5} {'device':>6} {'batch/rank':>10} {'samples/s':>10} {'per rank':>9} {'step ms':>8} {'allreduce':>9} {'of it waiting':>13} {'efficiency':>10}")
    print(f"{size:>5} {device.type:>6} {args.batch_per_rank:>10} {total:>10.1f} {total / size:>9.1f} {result['step_ms']:>8.1f} "
          f"{100 * result['allreduce_share']:>8.1f}% {100 * result['waiting_for_slowest_share']:>12.1f}% {result['efficiency']:>10.2f}"
          f"  (one rank alone: {baseline:.1f} samples/s; compute per step {result['compute_ms_fastest_rank']}-{result['compute_ms_slowest_rank']} ms by rank)")
    print(THROUGHPUT_PREFIX + json.dumps(result, separators=(", ", ": ")), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
