import pathlib

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

FIXTURES = pathlib.Path(__file__).parent / "fixtures"


@pytest.fixture
def proc_fixtures() -> pathlib.Path:
    return FIXTURES / "proc"


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    """Finished spans of `provider`, in memory."""
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter):
    """An SDK TracerProvider exporting synchronously to `exporter`."""
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    yield tp
    tp.shutdown()
