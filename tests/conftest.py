"""Shared fixtures."""

from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture
def shared_data() -> Path:
    """The real corpora in ``../shared/data`` (dlfs2/, chatbot_ko/, multi30k/); skip loudly where absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data is absent: data-bound acceptance test skipped")
    return SHARED_DATA
