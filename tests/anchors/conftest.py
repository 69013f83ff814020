"""Fixtures for the resume-anchor tests: an SDK tracer with an in-memory exporter, a clean
environment for the anchor settings."""

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


@pytest.fixture(autouse=True)
def _anchor_settings_unset(monkeypatch):
    # Tests set these explicitly; a developer's shell must not change what they see.
    monkeypatch.delenv("YETO_DILOCO_ANCHOR_DTYPE", raising=False)
    monkeypatch.delenv("YETO_DILOCO_RESUME_ANCHOR_MMAP", raising=False)


@pytest.fixture
def exporter():
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter):
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    yield tp
    tp.shutdown()
