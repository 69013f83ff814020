"""The gateway (collector/gateway.yaml) refuses OTLP clients without TLS or without the bearer token."""

from __future__ import annotations

import http.client
import os
import shutil
import ssl
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest

import required_components
from required_components import missing

GATEWAY_CONFIG = Path(__file__).resolve().parents[2] / "collector" / "gateway.yaml"
TOKEN = "e2e-gateway-token"
EMPTY_TRACES = b'{"resourceSpans":[]}'


def _self_signed(workdir: Path) -> tuple[Path, Path]:
    cert, key = workdir / "cert.pem", workdir / "key.pem"
    try:
        from cryptography import x509  # noqa: F401
    except ImportError:
        openssl = shutil.which("openssl")
        if openssl is None:
            missing("openssl (for a self-signed test certificate)", "apt-get install openssl")
        subprocess.run([openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:prime256v1", "-nodes", "-subj", "/CN=127.0.0.1",
                        "-addext", "subjectAltName=IP:127.0.0.1", "-days", "1",
                        "-keyout", str(key), "-out", str(cert)],
                       check=True, capture_output=True, timeout=30)
        return cert, key
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    pkey = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
                   .public_key(pkey.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(days=1))
                   .add_extension(x509.SubjectAlternativeName(
                       [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
                   .sign(pkey, hashes.SHA256()))
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key.write_bytes(pkey.private_bytes(serialization.Encoding.PEM,
                                       serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    return cert, key


def _gateway(stack_module, otelcol_bin: str, workdir: Path, cert: Path, key: Path):
    """(ports, the gateway as a stack component on them, not started)."""
    ports = dict(zip(("grpc", "http", "health", "telemetry"), stack_module.free_ports(4)))
    env = dict(os.environ)
    env.update({
        "YETO_GATEWAY_OTLP_GRPC_ENDPOINT": f"127.0.0.1:{ports['grpc']}",
        "YETO_GATEWAY_OTLP_HTTP_ENDPOINT": f"127.0.0.1:{ports['http']}",
        "YETO_GATEWAY_HEALTH_ENDPOINT": f"127.0.0.1:{ports['health']}",
        "YETO_GATEWAY_TELEMETRY_HOST": "127.0.0.1",
        "YETO_GATEWAY_TELEMETRY_PORT": str(ports["telemetry"]),
        "YETO_GATEWAY_TOKEN": TOKEN,
        "YETO_GATEWAY_TLS_CERT_FILE": str(cert),
        "YETO_GATEWAY_TLS_KEY_FILE": str(key),
        "YETO_GATEWAY_QUEUE_DIR": str(workdir / "queue"),
        "YETO_GATEWAY_TRACES_EXPORTERS": "[debug]",
        "YETO_GATEWAY_METRICS_EXPORTERS": "[debug]",
        "YETO_GATEWAY_LOGS_EXPORTERS": "[debug]",
    })
    return ports, stack_module.Component(
        name="gateway",
        argv=[otelcol_bin, "--config", str(GATEWAY_CONFIG)],
        env=env,
        health_url=f"http://127.0.0.1:{ports['health']}/",
        ready=lambda status, body: status == 200,
        log_path=workdir / "gateway.log",
    )


@pytest.fixture(scope="module")
def gateway(otelcol_bin, tmp_path_factory):
    stack_module = required_components.stack_module()
    workdir = tmp_path_factory.mktemp("gateway")
    cert, key = _self_signed(workdir)
    # Another process may take a free port before the gateway binds it: then fresh ports.
    for attempt in range(1, stack_module.PORT_ATTEMPTS + 1):
        ports, component = _gateway(stack_module, otelcol_bin, workdir, cert, key)
        try:
            component.start(timeout=60.0)
            break
        except stack_module.StackError as error:
            if attempt == stack_module.PORT_ATTEMPTS or \
                    "address already in use" not in str(error).lower():
                raise
    try:
        yield {"ports": ports, "cert": cert, "component": component}
    finally:
        component.stop()


def _post(url: str, headers: dict[str, str], context: ssl.SSLContext | None) -> int:
    request = urllib.request.Request(url, data=EMPTY_TRACES, method="POST",
                                     headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            response.read()
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def _tls_context(cert: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(cert))


@pytest.mark.parametrize("headers, expected", [
    ({"Authorization": f"Bearer {TOKEN}"}, "ok"),
    ({}, 401),
    ({"Authorization": "Bearer not-the-token"}, 401),
], ids=["token", "no-token", "wrong-token"])
def test_gateway_otlp_http_over_tls(gateway, headers, expected):
    url = f"https://127.0.0.1:{gateway['ports']['http']}/v1/traces"
    status = _post(url, headers, _tls_context(gateway["cert"]))
    if expected == "ok":
        assert 200 <= status < 300, (status, gateway["component"].log_tail())
    else:
        assert status == expected, (status, gateway["component"].log_tail())


def test_gateway_otlp_http_plaintext_refused(gateway):
    url = f"http://127.0.0.1:{gateway['ports']['http']}/v1/traces"
    try:
        status = _post(url, {"Authorization": f"Bearer {TOKEN}"}, None)
    except (OSError, http.client.HTTPException):
        return  # refused at the connection level
    assert not 200 <= status < 300, status


def _grpc():
    try:
        import grpc
    except ImportError:
        missing("grpcio (beside this python)", 'pip install -e ".[test]"')
    return grpc


def _grpc_export(gateway, *, tls: bool, token: str | None):
    grpc = _grpc()
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

    target = f"127.0.0.1:{gateway['ports']['grpc']}"
    if tls:
        channel = grpc.secure_channel(target, grpc.ssl_channel_credentials(
            gateway["cert"].read_bytes()))
    else:
        channel = grpc.insecure_channel(target)
    metadata = [("authorization", f"Bearer {token}")] if token is not None else None
    try:
        stub = trace_service_pb2_grpc.TraceServiceStub(channel)
        stub.Export(trace_service_pb2.ExportTraceServiceRequest(), timeout=10, metadata=metadata)
        return grpc.StatusCode.OK
    except grpc.RpcError as error:
        return error.code()
    finally:
        channel.close()


def test_gateway_otlp_grpc(gateway):
    grpc = _grpc()
    assert _grpc_export(gateway, tls=True, token=TOKEN) == grpc.StatusCode.OK
    assert _grpc_export(gateway, tls=True, token=None) == grpc.StatusCode.UNAUTHENTICATED
    assert _grpc_export(gateway, tls=True, token="not-the-token") == grpc.StatusCode.UNAUTHENTICATED
    assert _grpc_export(gateway, tls=False, token=TOKEN) != grpc.StatusCode.OK
