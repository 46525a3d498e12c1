"""A tiny OpenAI-compatible HTTP server for tests: a real socket on 127.0.0.1 that answers
``POST /v1/chat/completions`` (or, with ``chat=False``, only ``/v1/completions``) with scripted
replies and records every request it got."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = Callable[[dict[str, Any]], str]  # request body -> the model's answer text


class FakeOpenAI:
    def __init__(self, reply: Reply, *, chat: bool = True) -> None:
        self.reply = reply
        self.requests: list[tuple[str, dict[str, Any]]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server API
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append((self.path, body))
                if self.path == "/v1/chat/completions" and chat:
                    message = {"role": "assistant", "content": fake.reply(body)}
                    answer: dict[str, Any] = {"choices": [{"index": 0, "message": message}]}
                elif self.path == "/v1/completions":
                    answer = {"choices": [{"index": 0, "text": fake.reply(body)}]}
                else:
                    self.send_error(404)
                    return
                data = json.dumps({"object": "completion", "model": body["model"], **answer})
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data.encode())

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
