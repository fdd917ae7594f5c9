"""Next steps in the SDK's words (mpijob.nextsteps), from the steps as data the manager writes."""

import json
import re

import pytest
from support import REPO, _trainjob

from mpijob import JobStatus
from mpijob.nextsteps import Command, Step

VECTORS = json.loads((REPO / "pkg" / "api" / "testdata" / "steps.json").read_text())["vectors"]


@pytest.mark.parametrize("v", VECTORS, ids=[v["name"] for v in VECTORS])
def test_step_vectors(v):
    # The same vectors as Go's api.Step.Named and the dashboard: the CLI's command, and the
    # SDK's words made from the command's arguments.
    step = Step.from_dict(v["named"])
    assert step is not None
    assert (step.command.cli() if step.command else "") == v["cli"]
    assert step.sdk_text() == v["sdk"]
    if v["cli"]:
        assert v["cli"] in step.text


def test_next_steps_use_the_sdks_calls():
    steps = [{"text": "Raise the memory per Worker: `kubectl mpijob clone hello hello-2 --workers 2`.",
              "command": {"verb": "clone", "args": ["hello", "hello-2", "--workers", "2"]}},
             {"text": "Read what the ranks printed: `kubectl mpijob logs hello --all`.",
              "command": {"verb": "logs", "args": ["hello", "--all"]}},
             {"text": "Ask an administrator (`kubectl get localqueues` lists the queues)."}]
    tj = _trainjob({"phase": "Failed", "reason": "WorkerOOMKilled", "message": "Worker 1 ran out of memory.",
                    "nextStep": steps[0]["text"], "nextSteps": [s["text"] for s in steps], "steps": steps})
    s = JobStatus.from_trainjob(tj)
    assert s.next_step == 'Raise the memory per Worker: `client.clone_job("hello", "hello-2", workers=2)`.'
    assert s.next_steps[1:] == ['Read what the ranks printed: `client.get_logs("hello", worker="all")`.',
                                "Ask an administrator (`kubectl get localqueues` lists the queues)."]
    assert s.steps[0] == Step(steps[0]["text"], Command("clone", ["hello", "hello-2", "--workers", "2"]))


def test_the_words_are_never_read():
    # A command named in the words but not in the step's data stays the CLI's: the SDK makes
    # its calls from the command, not from the text; a command in the data that the words do
    # not hold changes nothing.
    tj = _trainjob({"phase": "Failed", "reason": "Failed", "message": "m",
                    "steps": [{"text": "See `kubectl mpijob logs hello --all`."},
                              {"text": "Read the log.", "command": {"verb": "logs", "args": ["hello"]}}]})
    s = JobStatus.from_trainjob(tj)
    assert s.next_steps == ["See `kubectl mpijob logs hello --all`.", "Read the log."]


def test_a_status_written_before_steps_keeps_its_words():
    tj = _trainjob({"phase": "Failed", "reason": "Failed", "message": "m",
                    "nextStep": "See `kubectl mpijob logs hello --all`.",
                    "nextSteps": ["See `kubectl mpijob logs hello --all`.", "Then resubmit."]})
    s = JobStatus.from_trainjob(tj)
    assert s.next_step == "See `kubectl mpijob logs hello --all`."
    assert s.next_steps == ["See `kubectl mpijob logs hello --all`.", "Then resubmit."]
    assert [st.text for st in s.steps] == s.next_steps and all(st.command is None for st in s.steps)


@pytest.mark.parametrize("bad", [
    [{"text": 3}],
    ["a step as a string"],
    [{"text": "t", "command": {"verb": 1}}],
    [{"text": "t", "command": {"verb": "logs", "args": [1]}}],
    [{"text": "t", "command": "logs"}],
])
def test_garbled_steps_are_read_as_far_as_they_go(bad):
    tj = _trainjob({"phase": "Failed", "reason": "Failed", "message": "m", "steps": bad})
    s = JobStatus.from_trainjob(tj)
    assert s.phase == "Failed"
    for st in s.steps:
        assert isinstance(st.text, str) and st.command is None


def test_every_verb_of_the_diagnosis_has_a_call():
    # Drift check: each verb the manager's rules give a command (cli("VERB", ...)) becomes an
    # SDK call, except create, which has none.
    src = "\n".join(p.read_text() for p in (REPO / "pkg" / "diagnose").glob("*.go") if not p.name.endswith("_test.go"))
    verbs = set(re.findall(r'\bcli\("([a-z ]+)"', src))
    assert {"logs", "clone", "describe", "events", "delete", "runtimes list"} <= verbs, verbs
    for verb in verbs - {"create"}:
        call = Command(verb, ["hello"] if verb != "runtimes list" else []).sdk()
        assert call.startswith("client.") and "kubectl" not in call, (verb, call)


def test_a_registration_step_uses_register_model():
    text = "Register the model yourself once the registry answers: kubectl mpijob register train digits:v2 --artifact model.npz."
    step = {"text": text, "command": {"verb": "register", "args": ["train", "digits:v2", "--artifact", "model.npz"]}}
    tj = _trainjob({"phase": "Succeeded", "reason": "ModelRegistrationFailed", "message": "Training completed, but model upload failed.",
                    "nextStep": text, "steps": [step]})
    s = JobStatus.from_trainjob(tj)
    assert s.next_step == ('Register the model yourself once the registry answers: '
                           'client.register_model("train", "digits", version="v2", artifact="model.npz").')
