"""FAULT INJECTOR, not a model: a local OpenAI-shaped HTTP server that answers with planned
faults (hangs, 500s, 429s with Retry-After, malformed bodies, dropped connections, raw answers
of any status and body) so the
client's retry logic can be tested. Real answers come from the llama.cpp server tests."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FaultInjector:
    """Serves /v1/chat/completions and /v1/embeddings; each request takes the next planned fault
    (or a planned answer text, "say:TEXT")."""

    def __init__(
        self, plan: list[str], refuse_formats: tuple[str, ...] = (), refuse_status: int = 400
    ) -> None:
        self.plan = list(plan)
        self.refuse_formats = refuse_formats
        self.refuse_status = refuse_status
        """response_format types answered with HTTP 400, like a hosted API without them
        ("json_schema", "json_object_schema" for json_object with a schema, "json_object")."""
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with owner.lock:
                    owner.requests.append(
                        {
                            "path": self.path,
                            "headers": dict(self.headers),
                            "body": body,
                            "t": time.time(),
                        }
                    )
                    mode = owner.plan.pop(0) if owner.plan else "ok"
                form = body.get("response_format") or {}
                kind = form.get("type", "") + ("_schema" if "schema" in form else "")
                if kind in owner.refuse_formats:
                    payload = json.dumps({"error": f"response_format {kind} not supported"})
                    self.send_response(owner.refuse_status)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload.encode())
                    return
                if mode.startswith("raw:"):  # raw:STATUS:BODY, "{auth}" -> the request's key
                    _, status, text = mode.split(":", 2)
                    auth = self.headers.get("Authorization", "")
                    payload = text.replace("{auth}", auth).encode()
                    self.send_response(int(status))
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                if mode.startswith("hang"):
                    time.sleep(float(mode.split(":")[1]))
                    mode = "ok"
                if mode == "drop":
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                if mode.startswith("429"):
                    self.send_response(429)
                    self.send_header("Retry-After", mode.split(":")[1] if ":" in mode else "1")
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"{}")
                    return
                if mode in ("500", "503", "400"):
                    payload = b'{"error": "injected"}'
                    self.send_response(int(mode))
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                if mode == "malformed":
                    payload = b"<html>gateway"
                elif self.path.endswith("/embeddings"):
                    data = [
                        {"index": i, "embedding": [float(len(t)), 1.0, 0.0]}
                        for i, t in enumerate(body["input"])
                    ]
                    payload = json.dumps({"data": data}).encode()
                else:  # "say:TEXT" answers TEXT (a wrong-shaped answer), else an echo
                    said = mode.startswith("say:")
                    text = mode[4:] if said else "echo: " + body["messages"][-1]["content"]
                    payload = json.dumps(
                        {
                            "choices": [
                                {
                                    "message": {"role": "assistant", "content": text},
                                    "finish_reason": "stop",
                                }
                            ],
                            "usage": {"prompt_tokens": 7, "completion_tokens": 3},
                        }
                    ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FaultInjector:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
