"""Next steps in the SDK's words.

mpijob-manager writes a job's next steps for every interface, with the CLI's
commands (``kubectl mpijob logs NAME --all``). Python users get the calls of
this SDK instead (``client.get_logs("hello", worker="all")``); what has no
SDK call (``kubectl get localqueues``) stays as it is.
"""

from __future__ import annotations

import json
import re

# `kubectl mpijob VERB ARGS` in backticks, or in parentheses, or bare up to the
# end of the sentence.
_CLI = re.compile(r"(`)?kubectl mpijob (logs|clone|describe|events|runtimes list)\b([^`)]*?)(?(1)`|(?=\)|\.(?:\s|$)|,|;|$))")


def _arg(args: list[str], flag: str) -> str:
    if flag in args:
        i = args.index(flag)
        if i + 1 < len(args):
            return args[i + 1]
    return ""


def _command(words: list[str]) -> str:
    """A clone's new command as a Python list: the words the step gives, with ``...`` for
    the placeholder of the job's own program (``<command>``)."""
    out: list[str] = []
    for w in words:
        if w.startswith("<") or (out and out[-1] == "..." and not w.startswith("-")):
            # "<command>", or the rest of "<command with a smaller batch>".
            if not out or out[-1] != "...":
                out.append("...")
            continue
        out.append(json.dumps(w))
    return "[" + ", ".join(out or ["..."]) + "]"


def _call(job: str, verb: str, rest: str) -> str:
    args = rest.split()
    positional = [a for i, a in enumerate(args) if not a.startswith("-") and (i == 0 or not args[i - 1].startswith("--"))]
    name = f'"{job}"' if job else "NAME"
    if verb == "logs":
        if "--all" in args:
            return f'client.get_logs({name}, worker="all")'
        w = _arg(args, "--worker")
        if w:
            return f"client.get_logs({name}, worker={w if w.isdigit() else 'N'})"
        return f"client.get_logs({name})"
    if verb == "clone":
        new = positional[1] if len(positional) > 1 and positional[1] != "NEW" else "NEW"
        kwargs = ""
        workers = _arg(args, "--workers")
        if workers:
            kwargs += f", workers={workers if workers.isdigit() else 'N'}"
        slots = _arg(args, "--slots-per-worker")
        if slots:
            kwargs += f", slots_per_worker={slots if slots.isdigit() else 'N'}"
        runtime = _arg(args, "--runtime")
        if runtime:
            kwargs += f', runtime="{runtime}"'
        gpus = _arg(args, "--gpus")
        if gpus:
            kwargs += f', resources_per_worker={{"nvidia.com/gpu": {gpus if gpus.isdigit() else "N"}}}'
        if "--" in args:
            kwargs += f", command={_command(args[args.index('--') + 1:])}"
        return f'client.clone_job({name}, "{new}"{kwargs})'
    if verb == "describe":
        return f"client.get_job({name})"
    if verb == "events":
        return f"client.get_events({name})"
    return "client.list_runtimes()"


def sdk_words(text: str, job: str = "") -> str:
    """``text`` with the CLI commands it names replaced by the SDK calls that do the same,
    for job ``job``."""
    def sub(m: re.Match[str]) -> str:
        call = _call(job, m.group(2), m.group(3) or "")
        return f"`{call}`" if m.group(1) else call
    return _CLI.sub(sub, text)
