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


@pytest.fixture(autouse=True)
def _settings_read_afresh():
    """A process reads its settings once (`current_settings`); each test sets its own
    environment, so each starts without the previous test's copy, and leaves none behind."""
    from yeto_otel.settings import forget_current_settings

    forget_current_settings()
    yield
    forget_current_settings()


@pytest.fixture
def setting(monkeypatch):
    """`setting(NAME, value)`: the variable set for this test as a process would have it from
    its start: in the environment, and in the process's settings, read afresh (they are read
    once per process, and a fixture may have read them already)."""
    from yeto_otel.settings import forget_current_settings

    def set_setting(name: str, value: str) -> None:
        monkeypatch.setenv(name, value)
        forget_current_settings()

    return set_setting
