"""Typed errors from the API server's answers (mpijob.errors)."""

import json

import pytest
from support import REPO, RUNTIME_NOT_SEEN

from mpijob import (
    InvalidJobError,
    QuotaExceededError,
)
from mpijob.errors import from_api_exception


def test_quota_error_carries_the_numbers():
    # The Status the API server returns for mpijob's quota denial: the vector the CLI's tests
    # read too (pkg/api/testdata/quota-denial.json, written by pkg/admission's test).
    class E:
        status = 403
        reason = "Forbidden"
        body = (REPO / "pkg/api/testdata/quota-denial.json").read_text()
    err = from_api_exception(E())
    assert isinstance(err, QuotaExceededError)
    assert [(c["resource"], c["requested"], c["quota"], c["in_use"], c["max_workers"]) for c in err.causes] == [
        ("memory (limits)", "66048Mi", "64Gi", "0", 7), ("memory", "65664Mi", "64Gi", "0", 7), ("nvidia.com/gpu", "24", "8", "0", 2)]
    assert (err.resource, err.requested, err.quota, err.in_use) == ("memory (limits)", "66048Mi", "64Gi", "0")


def test_admission_down_is_said_plainly():
    class Down:
        status = 500
        reason = "Internal Server Error"
        body = json.dumps({"kind": "Status", "status": "Failure", "reason": "InternalError", "code": 500,
                           "message": 'Internal error occurred: failed calling webhook "validate.trainjob.mpijob.dev": '
                                      'failed to call webhook: Post "https://127.0.0.1:9445/v": connect: connection refused'})
    err = from_api_exception(Down())
    assert type(err).__name__ == "MPIJobError"
    assert str(err).startswith("mpijob admission is unavailable, so no MPI job can be created or changed now")
    assert "validate.trainjob.mpijob.dev" in str(err)

    class NoPods(Down):
        body = json.dumps({"kind": "Status", "status": "Failure", "reason": "InternalError", "code": 500,
                           "message": 'Internal error occurred: failed calling webhook "creator.trainjob.mpijob.dev": '
                                      'failed to call webhook: Post "https://mpijob-webhook-service.mpijob-system.svc:443/m?timeout=10s": '
                                      'no endpoints available for service "mpijob-webhook-service"'})
    assert str(from_api_exception(NoPods())).startswith("mpijob admission is unavailable")

    class PolicyDenied(Down):
        status = 403
        body = json.dumps({"kind": "Status", "status": "Failure", "reason": "Forbidden", "code": 403,
                           "message": 'trainjobs.trainer.kubeflow.org "x" is forbidden: ValidatingAdmissionPolicy '
                                      "'mpijob-manager-running.mpijob.dev' with binding 'mpijob-manager-running.mpijob.dev' "
                                      "denied request: mpijob-manager is not running (no ready replica)"})
    err = from_api_exception(PolicyDenied())
    assert type(err).__name__ == "MPIJobError"
    assert str(err) == "mpijob admission is unavailable: mpijob-manager is not running (no ready replica)"


def test_errors_are_classified_from_the_status_not_the_sentence():
    class Invalid:
        status = 422
        reason = "Unprocessable Entity"
        body = json.dumps({"kind": "Status", "status": "Failure", "reason": "Invalid", "code": 422,
                           "message": "TrainJob.trainer.kubeflow.org \"x\" is invalid: spec.trainer.numNodes: Invalid value: 0",
                           "details": {"causes": [{"reason": "FieldValueInvalid", "field": "spec.trainer.numNodes"}]}})
    err = from_api_exception(Invalid())
    assert isinstance(err, InvalidJobError) and err.field == "spec.trainer.numNodes"

    class Sentence:
        # A message that mentions quota but carries no quota cause is not a quota denial.
        status = 403
        reason = "Forbidden"
        body = json.dumps({"kind": "Status", "reason": "Forbidden", "code": 403,
                           "message": 'trainjobs is forbidden: User "dev-b" cannot create resource "trainjobs" (quota team)'})
    assert not isinstance(from_api_exception(Sentence()), QuotaExceededError)


@pytest.mark.parametrize("v", RUNTIME_NOT_SEEN, ids=[str(i) for i in range(len(RUNTIME_NOT_SEEN))])
def test_runtime_not_seen_matches_the_cli(v):
    # The vectors the Go tests load too (pkg/jobspec/testdata).
    from mpijob import jobspec
    assert jobspec.try_again(v["error"], True) == v["retry"]
    assert jobspec.try_again(v["error"], False) == v.get("anyCreate", False)


def test_explain_finds_the_refusal_another_sdk_hides_in_its_cause():
    """The Kubeflow SDK raises RuntimeError("Failed to create TrainJob ...") from the API's answer:
    mpijob.explain gives the refusal as mpijob's own calls would, naming the field."""
    import mpijob

    class ApiException(Exception):
        def __init__(self, status, body):
            super().__init__(f"({status})")
            self.status, self.body, self.reason = status, body, "Unprocessable Entity"

    body = json.dumps({"kind": "Status", "status": "Failure", "reason": "Invalid", "code": 422,
                       "message": 'admission webhook "validate.trainjob.mpijob.dev" denied the request: spec.trainer.image: Forbidden: '
                                  "runtime mpi-openmpi gives the image to the Launcher only: use kubectl mpijob create --image",
                       "details": {"causes": [{"field": "spec.trainer.image", "message": "Forbidden"}]}})
    try:
        try:
            raise ApiException(422, body)
        except Exception as inner:
            raise RuntimeError("Failed to create TrainJob: team-a/x") from inner
    except RuntimeError as e:
        got = mpijob.explain(e)
    assert isinstance(got, mpijob.InvalidJobError) and got.field == "spec.trainer.image", got
    assert "kubectl mpijob create --image" in str(got)
    assert mpijob.explain(RuntimeError("no cause")) is None
    quota = mpijob.QuotaExceededError("over", [])
    assert mpijob.explain(RuntimeError("wrapped")) is None and mpijob.explain(quota) is quota
