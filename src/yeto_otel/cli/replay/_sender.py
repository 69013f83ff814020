"""One OTLP/HTTP request and what its answer means, with the retry policy of the OTLP
specification: 429, 502, 503, 504 and connection failures are retried with exponential backoff
and jitter (1 s doubling to at most 30 s, each wait drawn from 50-150 %, as the collector's
exporters do), a `Retry-After` (seconds or an HTTP date) is waited out as given, and all waits
of one request together are bounded (`max_wait_s`); then the request is given up.

Every other answer is final. A 2xx is accepted, less what its `partialSuccess` says was
rejected. 401, 403, 404, 405 and 407, and TLS failures, are about the destination, not the
data (a wrong token, path or certificate): every later request would get the same, so they end
the run and nothing is recorded as sent. Any other answer (400, 413, 500, ...) rejects the
request's data for good.
"""

from __future__ import annotations

import email.utils
import gzip
import json
import random
import time
from dataclasses import dataclass
from typing import Callable

import requests

from ._endpoint import Destination

__all__ = ["ACCEPTED", "FATAL", "GAVE_UP", "REJECTED", "Answer", "RetryPolicy", "Sender", "encode", "retry_after"]

ACCEPTED, REJECTED, FATAL, GAVE_UP = "accepted", "rejected", "fatal", "gave up"
RETRYABLE = frozenset({429, 502, 503, 504})
DESTINATION_ERRORS = frozenset({401, 403, 404, 405, 407})
_REJECTED_FIELDS = ("rejectedSpans", "rejectedDataPoints", "rejectedLogRecords")


@dataclass(frozen=True)
class Answer:
    outcome: str  # ACCEPTED, REJECTED, FATAL or GAVE_UP
    status: int | None = None  # HTTP status; None when nothing answered
    rejected_items: int = 0  # partial success: items the collector refused
    message: str = ""


@dataclass(frozen=True)
class RetryPolicy:
    initial_s: float = 1.0
    max_interval_s: float = 30.0
    max_wait_s: float = 300.0  # all waits of one request together (the collector's default)
    jitter: float = 0.5

    def backoff(self, attempt: int, rng: random.Random) -> float:
        base = min(self.max_interval_s, self.initial_s * 2 ** attempt)
        return base * (1 - self.jitter + 2 * self.jitter * rng.random())


def retry_after(value: str | None, now: float) -> float | None:
    """Seconds a `Retry-After` header asks for (delta-seconds or an HTTP date); None if absent
    or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - now)


def _message(response: requests.Response) -> str:
    """The collector's own words: the `message` of a google.rpc.Status, else the text."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return body["message"]
    return response.text.strip()[:300] or (response.reason or "")


def _partial(response: requests.Response) -> tuple[int, str]:
    try:
        partial = response.json().get("partialSuccess") or {}
    except (ValueError, AttributeError):
        return 0, ""  # an empty or non-JSON 2xx body: all accepted
    if not isinstance(partial, dict):
        return 0, ""
    rejected = 0
    for name in _REJECTED_FIELDS:
        try:
            rejected += int(partial.get(name) or 0)
        except (TypeError, ValueError):
            pass
    return rejected, str(partial.get("errorMessage") or "")


class Sender:
    """Posts OTLP JSON to one destination per signal through one HTTP session.
    `wait(seconds)` sleeps and returns True when the run is being stopped."""

    def __init__(self, destinations: dict[str, Destination], policy: RetryPolicy,
                 wait: Callable[[float], bool], clock: Callable[[], float] = time.time,
                 rng: random.Random | None = None) -> None:
        self.destinations = destinations
        self.policy = policy
        self._wait = wait
        self._clock = clock
        self._rng = rng or random.Random()
        self._session = requests.Session()
        self._session.trust_env = False  # proxies etc. only from what the user gave us
        self.retries = 0
        self._last: tuple[int | None, str] = (None, "")  # the last retryable failure

    def close(self) -> None:
        self._session.close()

    def send(self, signal: str, body: bytes) -> Answer:
        dest = self.destinations[signal]
        headers = {"Content-Type": "application/json", **dest.headers}
        if dest.compression == "gzip":
            body = gzip.compress(body, compresslevel=6)
            headers["Content-Encoding"] = "gzip"
        waited, attempt = 0.0, 0
        while True:
            answer, asked = self._attempt(dest, headers, body)
            if answer is not None:
                return answer
            # Never less than our own backoff: a `Retry-After: 0` (or a date gone by) must not
            # turn into a busy loop against a collector that is already overloaded.
            delay = max(asked or 0.0, self.policy.backoff(attempt, self._rng))
            last = self._last
            if waited + delay > self.policy.max_wait_s:
                return Answer(GAVE_UP, last[0], message=f"{last[1]}; gave up after "
                              f"{attempt + 1} tries and {waited:.0f} s of waiting")
            self.retries += 1
            if self._wait(delay):
                return Answer(GAVE_UP, last[0], message=f"{last[1]}; stopped while waiting")
            waited += delay
            attempt += 1

    def _attempt(self, dest: Destination, headers: dict, body: bytes
                 ) -> tuple[Answer | None, float | None]:
        """(final answer, None) or (None, seconds the server asked to wait, if it did)."""
        try:
            response = self._session.post(dest.url, data=body, headers=headers,
                                          timeout=dest.timeout_s, verify=dest.verify,
                                          cert=dest.client_cert, allow_redirects=False)
        except requests.exceptions.SSLError as exc:
            return Answer(FATAL, None, message=f"TLS with {dest.url} failed: {exc}"), None
        except requests.exceptions.RequestException as exc:
            self._last = (None, f"{type(exc).__name__} from {dest.url}")
            return None, None
        status = response.status_code
        if 200 <= status < 300:
            rejected, why = _partial(response)
            return Answer(ACCEPTED, status, rejected, why), None
        text = f"HTTP {status} from {dest.url}: {_message(response)}"
        if status in RETRYABLE:
            self._last = (status, text)
            return None, retry_after(response.headers.get("Retry-After"), self._clock())
        return Answer(FATAL if status in DESTINATION_ERRORS else REJECTED, status,
                      message=text), None


def encode(value: object) -> bytes:
    """Compact JSON, as a request body."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
