"""Where each signal goes: the collector's OTLP/HTTP endpoint, headers, TLS, timeout and
compression, from the standard `OTEL_EXPORTER_OTLP_*` variables with the precedence the
specification and the SDK's OTLP/HTTP exporters use, and flags that override them.

For each signal, a signal-specific variable (`OTEL_EXPORTER_OTLP_TRACES_HEADERS`) replaces the
general one (`OTEL_EXPORTER_OTLP_HEADERS`); it is not merged with it. A signal-specific endpoint
is used as it is; the general one gets `/v1/<signal>` appended; with neither, the default is
`http://localhost:4318`. A flag wins over both variables for every signal. The timeout is in
seconds, as the Python SDK reads the variable, so one environment means the same to the
trainer and to the replay. `OTEL_EXPORTER_OTLP_INSECURE` is the gRPC exporters' (plaintext
without a scheme); over HTTP the scheme says whether TLS is used, so it is not read here.
"""

from __future__ import annotations

import argparse
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from ...settings import SettingsError, parse_sdk_duration

__all__ = ["DEFAULT_ENDPOINT", "DEFAULT_TIMEOUT_S", "Destination", "add_destination_arguments",
           "destinations", "parse_headers"]

DEFAULT_ENDPOINT = "http://localhost:4318"
DEFAULT_TIMEOUT_S = 10.0
_PREFIX = "OTEL_EXPORTER_OTLP_"
_HTTP_PROTOCOLS = ("http/protobuf", "http/json")
COMPRESSIONS = ("gzip", "none")


@dataclass(frozen=True)
class Destination:
    """One signal's endpoint and how to reach it."""
    url: str
    headers: dict[str, str] = field(default_factory=dict)
    verify: bool | str = True  # requests' `verify`: True, False (--insecure) or a CA file
    client_cert: tuple[str, str] | str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    compression: str = "none"


def add_destination_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "destination", "Each flag overrides the standard OTEL_EXPORTER_OTLP_* variables (and "
        "their _TRACES_/_METRICS_/_LOGS_ forms) for every signal.")
    group.add_argument("--endpoint", metavar="URL",
                       help="the collector's OTLP/HTTP base URL; /v1/<signal> is appended "
                            f"(default: OTEL_EXPORTER_OTLP_ENDPOINT, else {DEFAULT_ENDPOINT})")
    group.add_argument("--header", action="append", default=[], metavar="NAME=VALUE",
                       help="a request header, e.g. 'authorization=Bearer <token>' (repeat "
                            "for more; added over OTEL_EXPORTER_OTLP_HEADERS)")
    group.add_argument("--certificate", metavar="FILE",
                       help="CA certificate(s) to verify the collector with (PEM)")
    group.add_argument("--client-certificate", metavar="FILE",
                       help="client certificate for mutual TLS (PEM)")
    group.add_argument("--client-key", metavar="FILE", help="the client certificate's key")
    group.add_argument("--insecure", action="store_true",
                       help="do not verify the collector's certificate (https only)")
    group.add_argument("--timeout", metavar="SECONDS",
                       help=f"per request (default: OTEL_EXPORTER_OTLP_TIMEOUT, else "
                            f"{DEFAULT_TIMEOUT_S:g})")
    group.add_argument("--compression", choices=COMPRESSIONS,
                       help="request body compression (default: OTEL_EXPORTER_OTLP_COMPRESSION, "
                            "else none)")


def parse_headers(text: str, name: str) -> dict[str, str]:
    """`k1=v1,k2=v2` (names and values URL-encoded, as the specification says) -> {k: v}."""
    headers = {}
    for part in text.split(","):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        key = urllib.parse.unquote(key).strip().lower()
        if not sep or not key:
            raise SettingsError(name, text, "comma-separated name=value pairs, URL-encoded",
                                f"{part.strip()!r} has no name=value")
        headers[key] = urllib.parse.unquote(value).strip()
    return headers


def _variable(env: Mapping[str, str], signal: str, key: str) -> tuple[str, str] | None:
    """(name, value) of the signal-specific variable if set, else of the general one."""
    for name in (f"{_PREFIX}{signal.upper()}_{key}", f"{_PREFIX}{key}"):
        value = env.get(name, "").strip()
        if value:
            return name, value
    return None


def _url(env: Mapping[str, str], signal: str, flag: str | None) -> str:
    if flag:
        base, name = flag, "--endpoint"
    else:
        specific = f"{_PREFIX}{signal.upper()}_ENDPOINT"
        if env.get(specific, "").strip():
            url = env[specific].strip()
            _check_url(url, specific)
            return url
        base, name = env.get(f"{_PREFIX}ENDPOINT", "").strip() or DEFAULT_ENDPOINT, \
            f"{_PREFIX}ENDPOINT"
    _check_url(base, name)
    return f"{base.rstrip('/')}/v1/{signal}"


def _check_url(url: str, name: str) -> None:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SettingsError(name, url, "an http:// or https:// URL with a host",
                            "replay speaks OTLP/HTTP")


def _check_protocol(env: Mapping[str, str], signal: str, flagged: bool) -> None:
    """An environment set up for gRPC (the SDK's default port 4317) points the replay at a
    port that does not speak HTTP: say so instead of failing every request."""
    found = _variable(env, signal, "PROTOCOL")
    if found and not flagged and found[1] not in _HTTP_PROTOCOLS:
        name, value = found
        raise SettingsError(name, value, ", ".join(_HTTP_PROTOCOLS),
                            "replay sends OTLP/HTTP (JSON): give --endpoint the collector's "
                            "HTTP port (4318 by default)")


def _timeout(env: Mapping[str, str], signal: str, flag: str | None) -> float:
    found = ("--timeout", flag) if flag else _variable(env, signal, "TIMEOUT")
    if found is None:
        return DEFAULT_TIMEOUT_S
    try:
        return parse_sdk_duration(found[1])
    except ValueError as exc:
        raise SettingsError(found[0], found[1], "a number of seconds above 0", str(exc)) from None


def _compression(env: Mapping[str, str], signal: str, flag: str | None) -> str:
    found = ("--compression", flag) if flag else _variable(env, signal, "COMPRESSION")
    if found is None:
        return "none"
    if found[1].lower() not in COMPRESSIONS:
        raise SettingsError(found[0], found[1], ", ".join(COMPRESSIONS))
    return found[1].lower()


def _file(env: Mapping[str, str], signal: str, key: str, flag: str | None) -> str | None:
    found = (f"--{key.lower().replace('_', '-')}", flag) if flag else _variable(env, signal, key)
    if found is None:
        return None
    if not Path(found[1]).expanduser().is_file():
        raise SettingsError(found[0], found[1], "a readable PEM file", "no such file")
    return str(Path(found[1]).expanduser())


def _destination(env: Mapping[str, str], signal: str, args: argparse.Namespace,
                 flag_headers: dict[str, str]) -> Destination:
    _check_protocol(env, signal, bool(args.endpoint))
    found = _variable(env, signal, "HEADERS")
    headers = parse_headers(found[1], found[0]) if found else {}
    headers.update(flag_headers)
    ca = _file(env, signal, "CERTIFICATE", args.certificate)
    cert = _file(env, signal, "CLIENT_CERTIFICATE", args.client_certificate)
    key = _file(env, signal, "CLIENT_KEY", args.client_key)
    if key and not cert:
        raise SettingsError("--client-key", key, "a key together with --client-certificate",
                            "a client key without its certificate")
    return Destination(url=_url(env, signal, args.endpoint), headers=headers,
                       verify=False if args.insecure else (ca or True),
                       client_cert=(cert, key) if key else cert,
                       timeout_s=_timeout(env, signal, args.timeout),
                       compression=_compression(env, signal, args.compression))


def destinations(env: Mapping[str, str], args: argparse.Namespace,
                 signals: tuple[str, ...]) -> dict[str, Destination]:
    """signal -> Destination; a value that cannot be used raises `SettingsError` naming it."""
    # A flag's header is taken literally (not URL-encoded): a value may hold `,` and `=`.
    flag_headers = dict(_split_header(item) for item in args.header)
    return {signal: _destination(env, signal, args, flag_headers) for signal in signals}


def _split_header(item: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key.strip():
        raise SettingsError("--header", item, "NAME=VALUE")
    return key.strip().lower(), value.strip()
