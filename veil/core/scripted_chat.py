"""A scripted OpenAI-compatible chat server on 127.0.0.1, for tests that cross the provider
boundary for real: veil in another process (``veil -p``, ``veil serve``) reaches it through
litellm and the OpenAI wire format, as it would reach a real provider.

::

    with ScriptedOpenAIServer(lambda request: "hello") as server:
        auth = {"providers": {"local": server.provider()}}
        ...  # a veil process configured with ``auth`` answers "hello"
        assert server.requests[0]["messages"][-1]["content"] == "..."

``POST /v1/chat/completions`` answers with a chat completion (or, when the request asks for
``"stream": true``, the same as server-sent chunks). Every request body is recorded. Anything
else is a 404.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Reply:
    """One scripted answer.

    Args:
        content: the assistant's text.
        content_json: instead of ``content``, the JSON text of the content value, sent as is
            (``'"ok \\\\ud800"'``: a lone surrogate escape, which no Python str can be encoded
            into by :mod:`json` on the way out).
        wait: an event the answer waits for (up to 60 s) before it is sent, to keep a turn
            running while a test does something else.
    """

    def __init__(
        self,
        content: str = "",
        *,
        content_json: str | None = None,
        wait: threading.Event | None = None,
    ) -> None:
        self.content = content
        self.content_json = content_json
        self.wait = wait

    def content_text(self) -> str:
        """The content as JSON text."""
        return self.content_json if self.content_json is not None else json.dumps(self.content)


_SLOT = "\x00content\x00"


def _with_content(document: dict[str, Any], reply: Reply) -> bytes:
    """``document`` as JSON bytes with the reply's content JSON text in place of ``_SLOT``."""
    return json.dumps(document).replace(json.dumps(_SLOT), reply.content_text()).encode("utf-8")


Responder = Callable[[dict[str, Any]], "Reply | str"]


class ScriptedOpenAIServer:
    """An OpenAI-compatible ``/v1/chat/completions`` endpoint answering through ``responder``.

    Args:
        responder: request body -> a :class:`Reply` or a plain answer text.

    Attributes:
        requests: every request body received, in order.
        arrived: set whenever a request arrives (tests wait on it, then clear it).
        url: ``http://127.0.0.1:<port>/v1`` once started.
    """

    def __init__(self, responder: Responder) -> None:
        self.responder = responder
        self.requests: list[dict[str, Any]] = []
        self.arrived = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self.url = ""

    def provider(self, name: str = "gpt-4o-mini") -> dict[str, Any]:
        """An ``auth.json`` provider entry pointing at this server (type ``openai``)."""
        return {"type": "openai", "base_url": self.url, "api_key": "sk-scripted-test-key"}

    def __enter__(self) -> ScriptedOpenAIServer:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self.send_error(404)
                    return
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                owner.requests.append(body)
                owner.arrived.set()
                reply = owner.responder(body)
                if isinstance(reply, str):
                    reply = Reply(reply)
                if reply.wait is not None:
                    reply.wait.wait(60)
                if body.get("stream"):
                    self._stream(body, reply)
                else:
                    self._send(body, reply)

            def _send(self, body: dict, reply: Reply) -> None:
                data = _with_content(
                    {
                        "id": "chatcmpl-scripted",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": body.get("model", ""),
                        "choices": [
                            {
                                "index": 0,
                                "finish_reason": "stop",
                                "message": {"role": "assistant", "content": _SLOT},
                            }
                        ],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
                    },
                    reply,
                )
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, body: dict, reply: Reply) -> None:
                def chunk(delta: dict, finish: str | None) -> dict:
                    return {
                        "id": "chatcmpl-scripted",
                        "object": "chat.completion.chunk",
                        "created": int(time.time()),
                        "model": body.get("model", ""),
                        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                    }

                chunks = [
                    _with_content(chunk({"role": "assistant", "content": _SLOT}, None), reply),
                    json.dumps(chunk({}, "stop")).encode(),
                ]
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                for data in chunks:
                    self.wfile.write(b"data: " + data + b"\n\n")
                self.wfile.write(b"data: [DONE]\n\n")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


def configure_project(
    project: Any, server: ScriptedOpenAIServer, model: str = "gpt-4o-mini"
) -> None:
    """Point a project's ``.veil/auth.json`` and ``.veil/settings.json`` at ``server`` (main
    model ``model``, provider ``scripted``), creating ``.veil/``."""
    from pathlib import Path

    veil_dir = Path(project) / ".veil"
    veil_dir.mkdir(parents=True, exist_ok=True)
    (veil_dir / "auth.json").write_text(
        json.dumps({"providers": {"scripted": server.provider()}}), encoding="utf-8"
    )
    (veil_dir / "settings.json").write_text(
        json.dumps({"models": {"main": {"model": model}}}), encoding="utf-8"
    )
