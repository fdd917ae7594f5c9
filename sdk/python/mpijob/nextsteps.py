"""Next steps in the SDK's words.

mpijob-manager writes a job's next steps as data (``status.steps``): each step's text, with
the CLI's command in it (``kubectl mpijob logs hello --all``), and that command as a verb and
its arguments. Python users get the calls of this SDK in its place
(``client.get_logs("hello", worker="all")``), made from the command's arguments, never from
the words; a step with no command (``kubectl get localqueues``) stays as it is. Go
(``pkg/api/steps.go``), this module and the dashboard test against the same vectors,
``pkg/api/testdata/steps.json``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

#: Every command's start, as the CLI writes it (Go: api.CommandPrefix).
PREFIX = "kubectl mpijob "


@dataclass
class Command:
    """A ``kubectl mpijob`` command of a next step: its verb (``logs``, ``clone``,
    ``describe``, ``events``, ``delete``, ``runtimes list``, ``create``) and arguments."""

    verb: str
    args: list[str] = field(default_factory=list)

    def cli(self) -> str:
        """The command as the CLI writes it (Go: api.Command.String)."""
        return PREFIX + " ".join([self.verb, *self.args])

    def sdk(self) -> str:
        """The SDK call that does what the command does."""
        return _call(self.verb, self.args)


@dataclass
class Step:
    """One next step: ``text`` as the manager wrote it (with the CLI's command), and the
    ``command`` in it, when there is one."""

    text: str
    command: Command | None = None

    def sdk_text(self) -> str:
        """The text with this SDK's call where the CLI's command is."""
        if self.command is None:
            return self.text
        return self.text.replace(self.command.cli(), self.command.sdk(), 1)

    @classmethod
    def from_dict(cls, d: Any, clean: Any = lambda s: s) -> Step | None:
        """A step of ``status.steps`` (None when it is not one); ``clean`` cleans each word."""
        if not isinstance(d, dict) or not isinstance(d.get("text"), str):
            return None
        c = d.get("command")
        cmd = None
        if isinstance(c, dict) and isinstance(c.get("verb"), str):
            args = c.get("args") or []
            if isinstance(args, list) and all(isinstance(a, str) for a in args):
                cmd = Command(clean(c["verb"]), [clean(a) for a in args])
        return cls(clean(d["text"]), cmd)


def _placeholder(v: str) -> str:
    return v if v.isdigit() else "N"


def _flags(args: list[str]) -> tuple[dict[str, str], set[str], list[str] | None]:
    """The flags with values, the flags alone, and the words after ``--`` (None: no ``--``)."""
    values: dict[str, str] = {}
    alone: set[str] = set()
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            return values, alone, args[i + 1:]
        if a.startswith("-") and i + 1 < len(args) and not args[i + 1].startswith("-"):
            values[a] = args[i + 1]
            i += 2
            continue
        alone.add(a)
        i += 1
    return values, alone, None


def _program(words: list[str]) -> str:
    """A clone's new command as a Python list: the words the step gives, with ``...`` for a
    placeholder of the job's own program (``<command>``)."""
    out = ["..." if w.startswith("<") else json.dumps(w) for w in words]
    return "[" + ", ".join(out or ["..."]) + "]"


def _call(verb: str, args: list[str]) -> str:
    if verb == "runtimes list":
        return "client.list_runtimes()"
    name = json.dumps(args[0]) if args else "NAME"
    if verb == "clone":
        new = json.dumps(args[1]) if len(args) > 1 else '"NEW"'
        values, _, program = _flags(args[2:])
        kwargs = ""
        if "--workers" in values:
            kwargs += f", workers={_placeholder(values['--workers'])}"
        if "--slots-per-worker" in values:
            kwargs += f", slots_per_worker={_placeholder(values['--slots-per-worker'])}"
        if "--runtime" in values:
            kwargs += f", runtime={json.dumps(values['--runtime'])}"
        if "--timeout" in values:
            kwargs += f", timeout={json.dumps(values['--timeout'])}"
        resources = []
        if "--gpus" in values:
            resources.append(f'"nvidia.com/gpu": {_placeholder(values["--gpus"])}')
        if "--memory" in values:
            resources.append(f'"memory": {json.dumps(values["--memory"])}')
        if resources:
            kwargs += ", resources_per_worker={" + ", ".join(resources) + "}"
        if program is not None:
            kwargs += f", command={_program(program)}"
        return f"client.clone_job({name}, {new}{kwargs})"
    values, alone, _ = _flags(args[1:])
    if verb == "logs":
        if "--all" in alone:
            return f'client.get_logs({name}, worker="all")'
        if "--worker" in values:
            return f"client.get_logs({name}, worker={_placeholder(values['--worker'])})"
        if "--rank" in values:
            return f"client.get_logs({name}, rank={_placeholder(values['--rank'])})"
        return f"client.get_logs({name})"
    if verb == "describe":
        return f"client.get_job({name})"
    if verb == "events":
        return f"client.get_events({name})"
    if verb == "delete":
        return f"client.delete_job({name})"
    if verb == "register":
        model, _, version = (args[1] if len(args) > 1 else "MODEL").partition(":")
        kwargs = f", version={json.dumps(version)}" if version else ""
        if "--artifact" in values:
            kwargs += f", artifact={json.dumps(values['--artifact'])}"
        return f"client.register_model({name}, {json.dumps(model)}{kwargs})"
    # A command the SDK has no call for (create) stays the CLI's.
    return Command(verb, args).cli()
