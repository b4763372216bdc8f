"""``/openapi.json`` is generated from the route table, and schemathesis finds no response that
breaks it (no 5xx, no undocumented status, content type or body) on a bounded run."""

from __future__ import annotations

import importlib.util

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import positive_data_acceptance

from veil.core.types import Route, RouteResponse, Summary
from veil.hookspecs import hookimpl

OWN_ROUTES = {
    ("post", "/sessions"),
    ("get", "/sessions"),
    ("get", "/sessions/{session_id}"),
    ("delete", "/sessions/{session_id}"),
    ("post", "/sessions/{session_id}/close"),
    ("post", "/sessions/{session_id}/messages"),
    ("post", "/sessions/{session_id}/messages/stream"),
    ("post", "/sessions/{session_id}/compact"),
    ("get", "/sessions/{session_id}/context"),
    ("post", "/sessions/{session_id}/recall"),
    ("post", "/sessions/{session_id}/items/{item_id}/pin"),
    ("post", "/sessions/{session_id}/items/{item_id}/unpin"),
    ("get", "/health"),
    ("get", "/plugins"),
    ("get", "/openapi.json"),
    ("get", "/beliefs"),  # contributed by the veil.beliefs default plugin (register_routes)
}


def _refs(node) -> list[str]:
    if isinstance(node, dict):
        return ([node["$ref"]] if "$ref" in node else []) + [
            r for v in node.values() for r in _refs(v)
        ]
    if isinstance(node, list):
        return [r for v in node for r in _refs(v)]
    return []


def test_document_lists_every_route_with_schemas_and_statuses(make_client):
    client, _ = make_client()
    doc = client.get("/openapi.json").json()
    assert doc["openapi"] == "3.1.0"
    routes = {(m, p) for p, ops in doc["paths"].items() for m in ops}
    assert routes == OWN_ROUTES
    # every $ref resolves to a component
    for ref in _refs(doc):
        assert ref.startswith("#/components/schemas/")
        assert ref.rsplit("/", 1)[1] in doc["components"]["schemas"], ref
    compact = doc["paths"]["/sessions/{session_id}/compact"]["post"]
    # 403 / 421: a loopback server refuses foreign Origin / Host headers (veil_http.hosts)
    assert set(compact["responses"]) == {
        "200",
        "400",
        "403",
        "404",
        "409",
        "413",
        "421",
        "422",
        "501",
        "502",
    }
    out = doc["components"]["schemas"]["CompactOut"]
    assert set(out["required"]) == {
        "sessionId",
        "compactedCount",
        "newSize",
        "alreadyUpToDate",
        "session",
    }
    message = doc["components"]["schemas"]["PostMessage"]
    assert message["required"] == ["content"]
    assert message["additionalProperties"] is False
    assert set(doc["paths"]["/health"]["get"]["responses"]) == {"200", "403", "421"}
    stream = doc["paths"]["/sessions/{session_id}/messages/stream"]["post"]["responses"]["200"]
    assert list(stream["content"]) == ["text/event-stream"]
    query = doc["paths"]["/sessions"]["get"]["parameters"]
    assert query == [
        {
            "name": "limit",
            "in": "query",
            "required": False,
            "schema": {"type": "integer", "default": 50, "minimum": 1, "maximum": 500},
            "description": "most sessions returned",
        }
    ]
    # the document is valid OpenAPI 3.1 (schemathesis refuses invalid ones)
    schema = schemathesis.openapi.from_dict(doc)
    assert len([r.ok() for r in schema.get_all_operations()]) == len(OWN_ROUTES)


class _Echo:
    """A contributed JSON route and a contributed text route, fuzzed with the rest."""

    @hookimpl(optionalhook=True)  # a hook a plugin declares
    def register_routes(self, veil):
        def echo(req):
            return RouteResponse({"echo": req.json["word"]})

        def shout(req):
            return RouteResponse(
                req.body.decode("utf-8", "replace").upper(),
                content_type="text/plain; charset=utf-8",
            )

        return [
            Route(
                "/echo",
                "POST",
                echo,
                summary="Echo a word",
                request_schema={
                    "type": "object",
                    "properties": {"word": {"type": "string"}},
                    "required": ["word"],
                },
                response_schema={
                    "type": "object",
                    "properties": {"echo": {"type": "string"}},
                    "required": ["echo"],
                },
            ),
            Route(
                "/shout/{name}",
                "PUT",
                shout,
                summary="Upper-case a text",
                request_schema={"type": "string"},
                response_schema={"type": "string", "contentMediaType": "text/plain"},
            ),
        ]


class _Compactor:
    """Summarises whatever the core folds (a compaction plugin is needed: without one the route
    answers 501, which schemathesis counts as a server error)."""

    @hookimpl
    def summarise(self, session, messages, previous, instructions, mode):
        return Summary(f"{len(messages)} messages", calls=0)


def _plugins():
    plugins = [("echo", _Echo()), ("compactor", _Compactor())]
    if importlib.util.find_spec("veil_memoryfiles") is not None:
        import veil_memoryfiles

        plugins.append(("veil_memoryfiles", veil_memoryfiles))
    return plugins


def run_fuzz(strategy, fuzz_settings, excluded) -> int:
    """Run the cases of one strategy through every schemathesis check but ``excluded``;
    return how many requests were sent."""
    sent = 0

    @fuzz_settings
    @given(case=strategy)
    def fuzz(case):
        nonlocal sent
        sent += 1
        case.call_and_validate(excluded_checks=excluded)

    fuzz()
    return sent


@pytest.mark.parametrize(
    ("token", "examples", "modes"),
    [
        (None, 30, (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)),
        ("fuzz-token-0123456789", 8, (GenerationMode.POSITIVE,)),
    ],
    ids=["open", "bearer"],
)
def test_schemathesis_finds_nothing(make_client, make_veil, token, examples, modes):
    """Every operation, positive and negative data, 30 examples each (derandomized, no
    database), against the ASGI app directly; the session id is a real session half of the
    time. With a bearer token: a shorter positive run (schemathesis also checks that a request
    without the token is refused)."""
    fuzz_settings = settings(
        max_examples=examples,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        print_blob=True,
    )
    veil = make_veil(plugins=_plugins())
    client, _ = make_client(veil, token=token, max_body_bytes=4096)
    # schemathesis' ASGI client says "Host: testserver"; a loopback server answers loopback names
    headers = {"Host": "127.0.0.1:5051"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    schema = schemathesis.openapi.from_asgi("/openapi.json", client.app, headers=headers)
    operations = [r.ok() for r in schema.get_all_operations()]
    assert len(operations) >= len(OWN_ROUTES) + 2
    own_paths = {path for _, path in OWN_ROUTES}
    failures: list[str] = []
    calls = 0
    for op in operations:
        # A contributed route cannot declare its path parameters' schemas (Route has no field
        # for them), so a schema-valid name such as "x" for /memory/{file} may rightly be 400.
        excluded = [positive_data_acceptance] if op.path not in own_paths else []
        for mode in modes:
            for real_session in (False, True) if "session_id" in op.path else (False,):
                sid = veil.new_session().id if real_session else None
                strategy = op.as_strategy(
                    generation_mode=mode,
                    path_parameters={"session_id": sid} if sid else None,
                    headers=headers or None,
                )

                try:
                    calls += run_fuzz(strategy, fuzz_settings, excluded)
                except Unsatisfiable:  # negative mode: this operation has nothing to break
                    assert mode is GenerationMode.NEGATIVE
                except Exception as exc:  # collect all, report together
                    failures.append(
                        f"{op.method.upper()} {op.path} [{mode.value}, "
                        f"real session={real_session}]: {exc}"
                    )
    assert not failures, "\n\n".join(failures)
    assert calls > 8 * len(operations)
