"""A stand-in for `assistant.llm.child` on a llama.cpp build that does not fit the CPU.

It takes the child's arguments, answers `GET /v1/models` as soon as it is up, and dies of SIGILL
(as such a build does on its first real prompt) on the first POST, unless it was started with
`--no_extra_bufts`; then it answers chat requests with a short streamed reply and choice requests
with fixed log-probabilities. With `--always` it dies of SIGILL either way.
"""

from __future__ import annotations

import argparse
import json
import signal
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

parser = argparse.ArgumentParser()
parser.add_argument("--port", type=int, required=True)
parser.add_argument("--host", default="127.0.0.1")
parser.add_argument("--no_extra_bufts", action="store_true")
parser.add_argument("--always", action="store_true")
args, _ = parser.parse_known_args()
REPLY = "The fallback answered."


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, format: str, *values: object) -> None:
        pass

    def _json(self, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._json({"object": "list", "data": [{"id": "scripted", "object": "model", "owned_by": "tests"}]})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        if args.always or not args.no_extra_bufts:
            signal.raise_signal(signal.SIGILL)  # to this thread, at once: nothing after it runs
            time.sleep(60)
        if self.path.endswith("/assistant/choice"):
            return self._json({"logprobs": {c: -0.1 if i == 0 else -2.5 for i, c in enumerate(body["choices"])}})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for delta, finish in ((REPLY, None), ("", "stop")):
            chunk = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "scripted",
                     "choices": [{"index": 0, "delta": {"content": delta} if delta else {}, "finish_reason": finish}]}
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")


ThreadingHTTPServer((args.host, args.port), Handler).serve_forever()
