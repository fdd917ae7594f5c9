"""Registering a model (mpijob.registry): the rules and vectors Go uses, and the REST calls
against a mocked registry (tests/test_registry_cluster... the real one: test_training_cluster)."""

import json
import pathlib
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest
from support import REPO

from mpijob import InvalidJobError, RegistryUnreachableError, VersionTakenError
from mpijob import registry as reg

VECTORS = json.loads((REPO / "pkg/registry/testdata/vectors.json").read_text())


def test_sdk_ships_the_clis_model_rules():
    shipped = (pathlib.Path(__file__).resolve().parents[1] / "mpijob" / "model-rules.json").read_bytes()
    assert shipped == (REPO / "pkg/registry/model-rules.json").read_bytes(), \
        "copy pkg/registry/model-rules.json to sdk/python/mpijob/"


@pytest.mark.parametrize("v", VECTORS["refs"], ids=[v["name"] for v in VECTORS["refs"]])
def test_parse_ref(v):
    if "error" in v:
        with pytest.raises(InvalidJobError) as e:
            reg.parse_ref("model", v["input"], v["default_version"])
        assert v["error"] in str(e.value) and "model" in str(e.value)
        return
    got = reg.parse_ref("model", v["input"], v["default_version"])
    assert (got.name, got.version) == (v["want"]["name"], v["want"]["version"])


@pytest.mark.parametrize("v", VECTORS["formats"], ids=[v["file"] for v in VECTORS["formats"]])
def test_format_of(v):
    got = reg.format_of(v["file"])
    assert got == (None if v["format"] is None else (v["format"], v["version"]))


@pytest.mark.parametrize("v", VECTORS["picks"], ids=[v["name"] for v in VECTORS["picks"]])
def test_pick_model(v):
    if "error" in v:
        with pytest.raises(InvalidJobError) as e:
            reg.pick_model("digits", v["artifacts"], v.get("chosen"))
        assert v["error"] in str(e.value)
        return
    assert reg.pick_model("digits", v["artifacts"], v.get("chosen")) == v["want"]


@pytest.mark.parametrize("v", VECTORS["uris"], ids=[v["name"] for v in VECTORS["uris"]])
def test_s3_uri(v):
    assert reg.s3_uri(v["bucket"], v["key"], v["endpoint"], v["region"]) == v["want"]


def test_address_of_names_the_local_gateway_and_openshift_ais_route():
    assert reg.address_of({reg.URL_ANNOTATION: "http://10.244.0.1:9468"}) == "http://10.244.0.1:9468"
    assert reg.address_of({reg.ODH_REST_ANNOTATION: "reg-rest.apps.example.com:443"}) == "https://reg-rest.apps.example.com:443"
    assert reg.address_of({}) == ""


class _Registry(BaseHTTPRequestHandler):
    """A mocked registry REST API, in memory."""
    state: dict = {}  # noqa: RUF012 (the test's one registry)

    def log_message(self, *args):  # quiet
        pass

    def _reply(self, code, body):
        raw = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def do_GET(self):
        s, u = self.state, urlparse(self.path)
        q = {k: v[0] for k, v in parse_qs(u.query).items()}
        p = u.path[len(reg.API_PATH):]
        if s.get("down"):
            return self._reply(502, {"message": "no upstream"})
        if p == "/registered_model":
            m = s["models"].get(q["name"])
            return self._reply(200, m) if m else self._reply(404, {"message": "not found"})
        if p == "/registered_models":
            return self._reply(200, {"items": list(s["models"].values())})
        if p == "/model_version":
            v = s["versions"].get(q["parentResourceId"] + "/" + q["name"])
            return self._reply(200, v) if v else self._reply(404, {"message": "not found"})
        if p.endswith("/artifacts"):
            return self._reply(200, {"items": s["artifacts"].get(p.split("/")[2], [])})
        self._reply(400, {"message": "unexpected " + p})

    def do_POST(self):
        s, p = self.state, urlparse(self.path).path[len(reg.API_PATH):]
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        s["posts"] += 1
        s["auth"] = self.headers.get("Authorization")
        if p == "/registered_models":
            body["id"] = str(len(s["models"]) + 1)
            s["models"][body["name"]] = body
        elif p == "/model_versions":
            body["id"] = "v" + str(len(s["versions"]) + 1)
            s["versions"][body["registeredModelId"] + "/" + body["name"]] = body
        else:
            vid = p.split("/")[2]
            body["id"] = "a" + vid
            s["artifacts"].setdefault(vid, []).append(body)
        self._reply(201, body)


@pytest.fixture
def registry():
    _Registry.state = {"models": {}, "versions": {}, "artifacts": {}, "posts": 0}
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Registry)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield _Registry.state, f"http://127.0.0.1:{srv.server_port}"
    srv.shutdown()


def _model(uid="u1"):
    return reg.Model(ref=reg.Ref("digits", "v1"), uri="s3://b/j/model.npz?endpoint=x", artifact="model.npz", format="numpy",
                     metrics={"accuracy": 0.96}, provenance={"uid": uid, "namespace": "team-a", "job": "j"})


def test_register_writes_the_model_its_version_and_artifact_once(registry):
    state, url = registry
    c = reg.RegistryClient(url, token="t0k")
    got = c.register(_model())
    assert (got.new_model, got.unchanged, state["posts"], state["auth"]) == (True, False, 3, "Bearer t0k")
    props = state["versions"]["1/v1"]["customProperties"]
    assert props["accuracy"] == {"metadataType": "MetadataDoubleValue", "double_value": 0.96}
    assert props["mpijob.job"]["string_value"] == "j"
    again = c.register(_model())
    assert again.unchanged and state["posts"] == 3


def test_a_version_of_another_job_is_not_taken_over(registry):
    _, url = registry
    c = reg.RegistryClient(url)
    c.register(_model("u1"))
    with pytest.raises(VersionTakenError, match="registered from job team-a/j"):
        c.register(_model("u2"))


def test_a_registry_that_is_down_is_said(registry):
    state, url = registry
    state["down"] = True
    with pytest.raises(RegistryUnreachableError, match="could not be reached"):
        reg.RegistryClient(url).register(_model())
    with pytest.raises(RegistryUnreachableError):
        reg.RegistryClient("http://127.0.0.1:9").register(_model())


def test_bad_addresses_name_the_field():
    with pytest.raises(InvalidJobError, match=r'registry_url "registry\.example\.com"'):
        reg.RegistryClient("registry.example.com")
    with pytest.raises(InvalidJobError, match=r'registry_ca "/nonexistent\.pem"'):
        reg.RegistryClient("https://r.example.com", ca_file="/nonexistent.pem")
