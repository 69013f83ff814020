"""A stand-in for a collector's OTLP/HTTP receiver on 127.0.0.1 (a free port), for the replay
tests: it records every request (path, headers, decoded JSON body) and answers what the test
scripts: 200, a partial success, 429 with Retry-After, 503, 400, 401, ..."""

from __future__ import annotations

import gzip
import http.server
import json
import threading
import time
from dataclasses import dataclass, field


@dataclass
class Request:
    path: str
    headers: dict
    body: dict
    at: float  # time.monotonic() when it arrived
    accepted: bool = False  # answered 2xx

    def markers(self) -> list[str]:
        """The test's line markers in it: span names, metric data point `line` attributes,
        log record `line` attributes (or step numbers)."""
        found = []
        for rs in self.body.get("resourceSpans", []):
            for ss in rs.get("scopeSpans", []):
                found += [s["name"] for s in ss.get("spans", [])]
        for rm in self.body.get("resourceMetrics", []):
            for sm in rm.get("scopeMetrics", []):
                for m in sm.get("metrics", []):
                    for p in m.get("gauge", {}).get("dataPoints", []):
                        found += [a["value"]["stringValue"] for a in p.get("attributes", [])
                                  if a["key"] == "line"]
        for rl in self.body.get("resourceLogs", []):
            for sl in rl.get("scopeLogs", []):
                for r in sl.get("logRecords", []):
                    found += [f"step-{a['value']['intValue']}" for a in r.get("attributes", [])
                              if a["key"] == "step"]
        return found


@dataclass
class OtlpServer:
    """`respond(request, index) -> (status, headers, body)` or None for 200 `{}`."""
    respond: object = None
    delay_s: float = 0.0
    requests: list = field(default_factory=list)

    def __post_init__(self):
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    raw = gzip.decompress(raw)
                request = Request(self.path, {k.lower(): v for k, v in self.headers.items()},
                                  json.loads(raw), time.monotonic())
                with owner.lock:
                    index = len(owner.requests)
                    owner.requests.append(request)
                if owner.delay_s:
                    time.sleep(owner.delay_s)  # a slow collector, not a synchronisation
                answer = owner.respond(request, index) if owner.respond else None
                status, headers, body = answer or (200, {}, b"{}")
                request.accepted = 200 <= status < 300
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.lock = threading.Lock()
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def markers(self) -> list[str]:
        with self.lock:
            return [m for r in self.requests if r.accepted for m in r.markers()]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def wait_until(predicate, timeout: float = 30.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)
