"""Write docs/sdk.md from the SDK's docstrings: python tools/gendoc.py [OUT|-]"""

import inspect
import pathlib
import sys

import mpijob
from mpijob import client, errors, progress, types

HEADER = """# Python SDK `mpijob`

Generated from the docstrings by `sdk/python/tools/gendoc.py` (`make docs`); do not edit by hand.

Install it (Python 3.10 or newer): `pip install ./sdk/python` — `make sdk-venv` does so into
`.cache/sdk-venv`. It talks to the cluster with the official `kubernetes` client, through your
kubeconfig or, in a pod, the pod's ServiceAccount. It reads the status mpijob-manager writes and
works on TrainJobs made by any client (CLI, kubectl, Kubeflow SDK).

A first job (the whole of `examples/sdk_quickstart.py`, which runs on `make dev`):

```python
{example}
```

"""


def section(title, obj, members=None):
    out = [f"## {title}\n"]
    doc = inspect.getdoc(obj)
    if doc:
        out.append(doc + "\n")
    for name in members or []:
        m = getattr(obj, name)
        sig = str(inspect.signature(m)).replace("(self, ", "(").replace("(self)", "()")
        out.append(f"### `{name}{sig}`\n")
        out.append((inspect.getdoc(m) or "") + "\n")
    return "\n".join(out)


def public_methods(cls) -> list[str]:
    """Every public method of cls, in the order of its source: none is left out of the reference."""
    names = [n for n, m in vars(cls).items() if not n.startswith("_") and callable(m)]
    return sorted(names, key=lambda n: inspect.getsourcelines(getattr(cls, n))[1])


def render() -> str:
    root = pathlib.Path(__file__).resolve().parents[3]
    example = (root / "examples" / "sdk_quickstart.py").read_text().strip()
    parts = [HEADER.format(example=example)]
    methods = public_methods(client.MPIJobClient)
    parts.append(section("MPIJobClient", client.MPIJobClient, methods))
    for cls in (types.JobSpec, types.MPIJob, types.JobStatus, types.Runtime, types.LifecycleEvent, types.JobEvent, progress.Report):
        fields = ", ".join(f"`{f}`" for f in cls.__dataclass_fields__)
        parts.append(f"## {cls.__name__}\n\n{inspect.getdoc(cls)}\n\nFields: {fields}.\n")
    parts.append("## Errors\n\n" + inspect.getdoc(errors) + "\n")
    for name in ("MPIJobError", "InvalidJobError", "JobNotFoundError", "PermissionDeniedError", "QuotaExceededError",
                 "JobFailedError", "WaitTimeoutError", "explain"):
        parts.append(f"### `{name}`\n\n{inspect.getdoc(getattr(errors, name))}\n")
    parts.append("## Phases\n\n" + ", ".join(f"`{p}`" for p in mpijob.PHASES) +
                 ". The same words as `kubectl mpijob` and docs/troubleshooting.md.\n")
    return "\n".join(parts)


if __name__ == "__main__":
    text = render()
    out = sys.argv[1] if len(sys.argv) > 1 else "-"
    if out == "-":
        sys.stdout.write(text)
    else:
        pathlib.Path(out).write_text(text)
