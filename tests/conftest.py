import pathlib

import pytest

FIXTURES = pathlib.Path(__file__).parent / "fixtures"


@pytest.fixture
def proc_fixtures() -> pathlib.Path:
    return FIXTURES / "proc"
