"""Shared fixtures: where the papers' data lives (../shared/data beside the checkout)."""
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"the papers' data folder is absent: {SHARED_DATA}")
    return SHARED_DATA
