"""Register a succeeded MPI job's model in a Kubeflow Model Registry (OpenShift AI's Model Registry).

What is registered is decided by the rules in ``model-rules.json`` (the same file Go's
``pkg/registry`` embeds; ``pkg/registry/testdata/vectors.json`` checks both): the model's name and
version, the model file among the job's artifacts and its format, and the artifact's URI in the
form OpenShift AI's dashboard reads back (``s3://BUCKET/KEY?endpoint=...&defaultRegion=...``).
:class:`RegistryClient` writes it through the registry's REST API (``/api/model_registry/v1alpha3``)
with the caller's bearer token, as ``kubectl mpijob register`` does.
"""

from __future__ import annotations

import contextlib
import json
import re
import ssl
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from .errors import InvalidJobError, MPIJobError, PermissionDeniedError

_RULES: dict[str, Any] = json.loads(resources.files(__package__).joinpath("model-rules.json").read_text(encoding="utf-8"))
API_PATH = "/api/model_registry/v1alpha3"
#: The annotation on a registry's Service that says where its REST API is (the local cluster's).
URL_ANNOTATION = "mpijob.dev/registry-url"
#: OpenShift AI's: host:port of the registry's REST route (HTTPS).
ODH_REST_ANNOTATION = "routing.opendatahub.io/external-address-rest"
#: The registry's Service when none is named: the local cluster's.
DEFAULT_REGISTRY = "model-registry/model-registry"


class RegistryUnreachableError(MPIJobError, ConnectionError):
    """The model registry did not answer; the job and its artifacts are unchanged."""


class VersionTakenError(InvalidJobError):
    """That version of the model exists already, registered from another job (or by hand)."""


@dataclass(frozen=True)
class Ref:
    """A model's name and version."""
    name: str
    version: str

    def __str__(self) -> str:
        return f"{self.name}:{self.version}"


def parse_ref(field_name: str, value: str, default_version: str) -> Ref:
    """``NAME[:VERSION]``; a missing version is ``default_version`` (the job's name)."""
    name, sep, version = value.strip().partition(":")
    if not sep:
        version = default_version
    if not re.fullmatch(_RULES["name"]["pattern"], name):
        raise InvalidJobError(f'{field_name} (model name) "{name}": {_RULES["name"]["fix"]}', field=field_name)
    if not re.fullmatch(_RULES["version"]["pattern"], version):
        raise InvalidJobError(f'{field_name} (version) "{version}": {_RULES["version"]["fix"]}', field=field_name)
    return Ref(name, version)


def format_of(file: str) -> tuple[str, str] | None:
    """A model file's format and format version, from its name (None: not a format mpijob knows)."""
    lower = file.lower()
    for f in _RULES["formats"]:
        if lower.endswith(f["suffix"]):
            return f["format"], f["version"]
    return None


def pick_model(job: str, artifacts: list[str], chosen: str | None = None) -> str:
    """The artifact to register: ``chosen`` (one of them), else the job's one ``model.*`` file."""
    names = sorted(artifacts)
    have = ", ".join(names) or "no artifacts"
    if chosen:
        if chosen in names:
            return chosen
        raise InvalidJobError(f'artifact "{chosen}": job {job} has no such artifact; it has {have}', field="artifact")
    models = [a for a in names if format_of(a) and a.rsplit("/", 1)[-1].startswith(_RULES["model_prefix"])]
    if len(models) == 1:
        return models[0]
    if not models:
        raise InvalidJobError(f"job {job} wrote no model file (model.onnx, model.pt, model.npz, ...) to $MPIJOB_OUTPUT_URI; "
                              f"it has {have}: name the file with artifact=", field="artifact")
    raise InvalidJobError(f"job {job} wrote {len(models)} model files ({', '.join(models)}): name the one to register with artifact=",
                          field="artifact")


def s3_uri(bucket: str, key: str, endpoint: str, region: str) -> str:
    """An object's URI in the form OpenShift AI's dashboard reads back."""
    q = {"endpoint": endpoint}
    if region:
        q["defaultRegion"] = region
    return f"s3://{bucket}/{key.lstrip('/')}?" + urllib.parse.urlencode(sorted(q.items()))


def address_of(annotations: dict[str, str]) -> str:
    """The REST address a registry's Service annotations name ("" when none does)."""
    if (annotations.get(URL_ANNOTATION) or "").strip():
        return annotations[URL_ANNOTATION].strip()
    if (annotations.get(ODH_REST_ANNOTATION) or "").strip():
        return "https://" + annotations[ODH_REST_ANNOTATION].strip()
    return ""


@dataclass
class Model:
    """What one registration writes."""
    ref: Ref
    uri: str
    artifact: str
    format: str = ""
    format_version: str = ""
    author: str = ""
    description: str = ""
    metrics: dict[str, float] = field(default_factory=dict)
    provenance: dict[str, str] = field(default_factory=dict)

    def properties(self) -> dict[str, Any]:
        out: dict[str, Any] = {k: {"metadataType": "MetadataDoubleValue", "double_value": v} for k, v in self.metrics.items()}
        for k, v in self.provenance.items():
            out[_RULES["property_prefix"] + k] = {"metadataType": "MetadataStringValue", "string_value": v}
        return out


@dataclass
class Registration:
    """What a registration did: the registry's ids; ``unchanged`` when the same job's model was
    there already under that version (nothing was written); ``new_model`` when the model was made."""
    model_id: str
    version_id: str
    artifact_id: str
    uri: str
    unchanged: bool = False
    new_model: bool = False


class RegistryClient:
    """The registry's REST API at ``url``, with a bearer ``token`` and, for a private CA, ``ca_file``."""

    def __init__(self, url: str, token: str = "", ca_file: str | None = None, timeout: float = 30):
        u = urllib.parse.urlparse(url.rstrip("/"))
        if u.scheme not in ("http", "https") or not u.netloc:
            raise InvalidJobError(f'registry_url "{url}": give the registry\'s REST address, e.g. https://my-registry-rest.apps.example.com',
                                  field="registry_url")
        self.url = url.rstrip("/")
        self._token = token
        self._timeout = timeout
        self._ctx: ssl.SSLContext | None = None
        if ca_file:
            try:
                self._ctx = ssl.create_default_context(cafile=ca_file)
            except (OSError, ssl.SSLError) as e:
                raise InvalidJobError(f'registry_ca "{ca_file}": give a PEM file of the CA that signed the registry\'s certificate: {e}',
                                      field="registry_ca") from None

    def _call(self, method: str, path: str, query: dict[str, str] | None = None, body: Any = None) -> tuple[int, Any]:
        url = self.url + API_PATH + path + ("?" + urllib.parse.urlencode(query) if query else "")
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(url, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self._token:
            req.add_header("Authorization", "Bearer " + self._token)
        try:
            with urllib.request.urlopen(req, timeout=self._timeout, context=self._ctx) as resp:
                return resp.status, json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as e:
            text = e.read().decode(errors="replace").strip()
            if e.code in (401, 403):
                raise PermissionDeniedError(f"you may not use the model registry ({self.url}): {e.code} {text}. Ask the registry's "
                                            "administrator for access to it (OpenShift AI: Settings, Model registry settings, Manage permissions)") from None
            if e.code in (502, 503, 504):
                raise RegistryUnreachableError(f"the model registry ({self.url}) could not be reached: {e.code} {text}") from None
            if e.code in (404, 409):
                return e.code, None
            with contextlib.suppress(ValueError, AttributeError):
                text = json.loads(text).get("message", text)
            raise MPIJobError(f"the model registry ({self.url}) refused {method} {path}: {e.code} {text}") from None
        except (urllib.error.URLError, OSError) as e:
            raise RegistryUnreachableError(f"the model registry ({self.url}) could not be reached: {getattr(e, 'reason', e)}") from None

    def find_model(self, name: str) -> dict[str, Any] | None:
        code, body = self._call("GET", "/registered_model", {"name": name})
        return body if code == 200 else None

    def model_names(self) -> list[str]:
        _, body = self._call("GET", "/registered_models", {"pageSize": "1000"})
        return [m.get("name", "") for m in (body or {}).get("items") or []]

    def register(self, m: Model) -> Registration:
        """Write ``m``: the model (when new), its version with the metrics and provenance, and
        the version's model artifact. The same job again changes nothing; a version left without
        its artifact gets it."""
        new_model = False
        rm = self.find_model(m.ref.name)
        if rm is None:
            code, rm = self._call("POST", "/registered_models", body={"name": m.ref.name, "owner": m.author})
            if code == 409:
                rm = self.find_model(m.ref.name)
                if rm is None:
                    raise MPIJobError(f"model {m.ref.name} was made by someone else meanwhile and cannot be read")
            else:
                new_model = True
        code, mv = self._call("GET", "/model_version", {"name": m.ref.version, "parentResourceId": rm["id"]})
        if code == 404:
            code, mv = self._call("POST", "/model_versions", body={
                "name": m.ref.version, "registeredModelId": rm["id"], "author": m.author, "description": m.description,
                "customProperties": m.properties()})
            if code == 409:
                raise VersionTakenError(f"version {m.ref.version} of model {m.ref.name} exists already: give another version", field="version")
        else:
            props = mv.get("customProperties") or {}
            uid = (props.get(_RULES["property_prefix"] + "uid") or {}).get("string_value", "")
            if uid != m.provenance.get("uid"):
                job = (props.get(_RULES["property_prefix"] + "job") or {}).get("string_value", "")
                ns = (props.get(_RULES["property_prefix"] + "namespace") or {}).get("string_value", "")
                frm = f"registered from job {ns}/{job}" if job else "registered by hand or by another tool"
                raise VersionTakenError(f"version {m.ref.version} of model {m.ref.name} exists already ({frm}): give another version",
                                        field="version")
        _, arts = self._call("GET", f"/model_versions/{urllib.parse.quote(mv['id'])}/artifacts")
        for a in (arts or {}).get("items") or []:
            if a.get("uri") == m.uri:
                return Registration(rm["id"], mv["id"], a["id"], m.uri, unchanged=True)
        # Named after the model, as the registry's own client names (and finds) it; the file is in the URI.
        artifact = {"artifactType": "model-artifact", "name": m.ref.name, "uri": m.uri, "description": m.description}
        if m.format:
            artifact["modelFormatName"] = m.format
        if m.format_version:
            artifact["modelFormatVersion"] = m.format_version
        _, a = self._call("POST", f"/model_versions/{urllib.parse.quote(mv['id'])}/artifacts", body=artifact)
        return Registration(rm["id"], mv["id"], a["id"], m.uri, new_model=new_model)

