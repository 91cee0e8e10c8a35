import os
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[1].parent / "shared"


def pytest_configure(config):
    """Point NLTK and the AP pipeline at ../shared when it exists and the variables are unset,
    and keep the corpus cache of the tests apart from the user's."""
    if (SHARED / "nltk_data").is_dir():
        os.environ.setdefault("NLTK_DATA", str(SHARED / "nltk_data"))
    if (SHARED / "corpora" / "ap89").is_dir():
        os.environ.setdefault("AP_DIR", str(SHARED / "corpora" / "ap89"))


def brown_available() -> bool:
    import nltk
    try:
        nltk.data.find("corpora/brown.zip")
        return True
    except LookupError:
        try:
            nltk.data.find("corpora/brown")
            return True
        except LookupError:
            return False


@pytest.fixture(scope="session")
def brown():
    if not brown_available():
        pytest.skip("the Brown corpus is not installed (set NLTK_DATA or run nltk.download('brown'))")
    from corpora.brown import load_brown
    return load_brown()
