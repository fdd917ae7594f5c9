"""Next steps in the SDK's words (mpijob.nextsteps)."""

import re

from support import REPO, _trainjob

from mpijob import (
    JobStatus,
)


def test_next_steps_use_the_sdks_calls():
    tj = _trainjob({"phase": "Failed", "reason": "WorkerOOMKilled", "message": "Worker 1 ran out of memory.",
                    "nextStep": "Raise the memory per Worker: `kubectl mpijob clone NAME NEW --workers 2`.",
                    "nextSteps": ["Raise the memory per Worker: `kubectl mpijob clone NAME NEW --workers 2`.",
                                  "Read what the ranks printed: `kubectl mpijob logs NAME --all`.",
                                  "Ask an administrator (`kubectl get localqueues` lists the queues)."]})
    s = JobStatus.from_trainjob(tj)
    assert s.next_step == 'Raise the memory per Worker: `client.clone_job("hello", "NEW", workers=2)`.'
    assert s.next_steps[1:] == ['Read what the ranks printed: `client.get_logs("hello", worker="all")`.',
                                "Ask an administrator (`kubectl get localqueues` lists the queues)."]


def test_every_next_step_command_of_the_diagnosis_has_sdk_words():
    # Drift check: each `kubectl mpijob VERB` the manager's diagnosis writes becomes an SDK call,
    # except the verbs the SDK has no call for.
    from mpijob.nextsteps import sdk_words
    src = "\n".join(p.read_text() for p in (REPO / "pkg" / "diagnose").glob("*.go") if not p.name.endswith("_test.go"))
    found = set(re.findall(r"kubectl mpijob ([a-z]+)", src))
    assert {"logs", "clone", "describe", "events"} <= found, found
    for verb in found - {"create", "list", "wait", "delete", "get"}:
        cmd = "runtimes list" if verb == "runtimes" else verb + " NAME"
        for text in (f"see `kubectl mpijob {cmd}`.", f"see kubectl mpijob {cmd}."):
            out = sdk_words(text, "hello")
            assert "kubectl mpijob" not in out and "client." in out, (verb, out)


def test_next_steps_that_name_the_job_become_calls_on_it():
    # The manager now names the job in its commands (clone pm-13485 pm-13485-2), not NAME NEW.
    from mpijob.nextsteps import sdk_words
    assert sdk_words("Use fewer: kubectl mpijob clone pm-13485 pm-13485-2 --workers 4.", "pm-13485") == \
        'Use fewer: client.clone_job("pm-13485", "pm-13485-2", workers=4).'
    assert sdk_words("Read it (`kubectl mpijob logs pm-13485 --worker N`).", "pm-13485") == \
        'Read it (`client.get_logs("pm-13485", worker=N)`).'


def test_clone_steps_keep_the_runtime_and_the_gpus():
    # The diagnosis's GPU steps (NoGPU, GPUSharedByRanks) change the runtime and the GPUs per Worker:
    # the SDK's call must too, or it advises a copy of the same job.
    from mpijob.nextsteps import sdk_words
    assert sdk_words("Ask for GPUs: `kubectl mpijob clone NAME NEW --runtime mpi-openmpi-gpu --gpus 1` (needs GPU nodes).", "cnn") == \
        'Ask for GPUs: `client.clone_job("cnn", "NEW", runtime="mpi-openmpi-gpu", resources_per_worker={"nvidia.com/gpu": 1})` (needs GPU nodes).'
    assert sdk_words("One each: `kubectl mpijob clone NAME NEW --slots-per-worker G --gpus G`.", "cnn") == \
        'One each: `client.clone_job("cnn", "NEW", slots_per_worker=N, resources_per_worker={"nvidia.com/gpu": N})`.'


def test_clone_steps_keep_the_new_command():
    # The fix of an MPI feature is in the command (RMAWindowRefused, NoSlotsToSpawn): the SDK's
    # call says it, with ... for the job's own program.
    from mpijob.nextsteps import sdk_words
    assert sdk_words("Use osc/pt2pt: `kubectl mpijob clone rma rma-2 -- mpirun --mca osc pt2pt -x MPI4PY_RC_THREAD_LEVEL=serialized <command>` (C: MPI_Init).", "rma") == \
        'Use osc/pt2pt: `client.clone_job("rma", "rma-2", command=["mpirun", "--mca", "osc", "pt2pt", "-x", "MPI4PY_RC_THREAD_LEVEL=serialized", ...])` (C: MPI_Init).'
    assert sdk_words("Or MPICH: `kubectl mpijob clone rma rma-2 --runtime mpi-mpich -- mpijob-mpiexec <command>`.", "rma") == \
        'Or MPICH: `client.clone_job("rma", "rma-2", runtime="mpi-mpich", command=["mpijob-mpiexec", ...])`.'
    assert sdk_words("Smaller: kubectl mpijob clone NAME NEW -- <command with a smaller batch>.", "cnn") == \
        'Smaller: client.clone_job("cnn", "NEW", command=[...]).'
