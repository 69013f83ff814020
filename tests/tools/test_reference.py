"""The reference docs generator (tools/reference.py) and the committed docs/ it writes."""

from repo_paths import ROOT
from tools.reference import main, render_all
from yeto_otel.census import CENSUS
from yeto_otel.names import SPANS
from yeto_otel.settings import SETTINGS


def test_committed_docs_match_the_code():
    assert main(["--check", "--root", str(ROOT)]) == 0, \
        "docs drifted from the code: run python -m tools.reference"


def test_check_fails_on_drift(tmp_path):
    for relative, text in render_all().items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(text.replace("yeto.process.memory.rss", "rss", 1))
    assert main(["--check", "--root", str(tmp_path)]) == 1


def test_every_name_is_documented():
    docs = render_all()
    for m in CENSUS:
        assert f"`{m.name}`" in docs["docs/metrics.md"]
        if m.step_log_key:  # the semantic conventions' rows have none
            assert f"`{m.step_log_key}`" in docs["docs/metrics.md"]
    for s in SETTINGS:
        assert f"`{s.name}`" in docs["docs/settings.md"]
    for span in SPANS:
        assert f"## `{span.name}`" in docs["docs/spans.md"]
        for attr in span.attributes:
            assert f"`{attr.name}`" in docs["docs/spans.md"]
