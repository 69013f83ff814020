"""The agent's receivers listen on loopback only: nothing off-host can send to them."""

from __future__ import annotations

import socket
import subprocess

import pytest


def non_loopback_ipv4() -> list[str]:
    """This host's IPv4 addresses other than 127.0.0.0/8."""
    found = set()
    try:
        out = subprocess.run(["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True,
                             timeout=10).stdout
        for line in out.splitlines():
            parts = line.split()
            if "inet" in parts:
                found.add(parts[parts.index("inet") + 1].split("/")[0])
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        found.update(info[4][0] for info in socket.getaddrinfo(socket.gethostname(), None,
                                                               socket.AF_INET))
    except OSError:
        pass
    return sorted(a for a in found if not a.startswith("127."))


def _connects(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(2.0)
        return sock.connect_ex((host, port)) == 0


@pytest.mark.parametrize("receiver", ["agent_otlp_grpc", "agent_otlp_http"])
def test_agent_receivers_are_loopback_only(stack, receiver):
    port = stack.ports[receiver]
    assert _connects("127.0.0.1", port), f"{receiver} is not listening on 127.0.0.1:{port}"
    addresses = non_loopback_ipv4()
    for address in addresses:
        assert not _connects(address, port), f"{receiver} reachable on {address}:{port}"
    if not addresses:
        # No other address to try from: the agent says where it listens.
        log = stack.log("agent", lines=100000)
        assert f"127.0.0.1:{port}" in log and f"0.0.0.0:{port}" not in log, log[-3000:]
