"""mpijob's stack hook, imported by every Python process of mpijob's images
(mpijob-stacks.pth in each of their site-packages folders).

On SIGUSR2 the process writes the Python stack of each of its threads to
$TMPDIR/mpijob-stacks/PID.txt (/tmp by default). faulthandler's handler runs
in C, so it answers while the main thread waits inside MPI, NCCL or another C
extension, where a handler written in Python would wait too. The process
keeps running. `kubectl mpijob stacks` (the SDK's get_stacks, the dashboard's
Stacks view) sends the signal to each rank and reads the file, as the user,
with no added capability: the process signals and files are the user's own.

A program of your own image gets the same by copying this file next to it
and importing it first (`import mpijob_stacks`). MPIJOB_STACKS=0 turns it off.
"""

import os


def _register() -> None:
    if os.environ.get("MPIJOB_STACKS", "1") == "0":
        return
    try:
        import atexit
        import faulthandler
        import signal

        folder = os.path.join(os.environ.get("TMPDIR") or "/tmp", "mpijob-stacks")
        os.makedirs(folder, mode=0o700, exist_ok=True)
        path = os.path.join(folder, "%d.txt" % os.getpid())
        # Appending: the reader empties the file before each signal, and
        # each dump then starts at its beginning.
        out = open(path, "a", encoding="utf-8")  # noqa: SIM115 (kept open for the handler)
        faulthandler.register(signal.SIGUSR2, file=out, all_threads=True, chain=False)

        def _remove(pid: int = os.getpid()) -> None:
            if os.getpid() == pid:
                try:
                    os.unlink(path)
                except OSError:
                    pass

        atexit.register(_remove)
    except Exception:  # noqa: BLE001 (never stop a program from starting)
        pass


_register()
