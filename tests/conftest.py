"""The test session's surroundings: the corpora beside the checkout, and a home of its own.

Nothing a test runs may read or write the user's own caches: every folder that defaults under `~`
(lmbench's corpus cache, matplotlib's font cache and configuration, torch's and other XDG caches) is
pointed at the session's temporary folder before any test module is imported (matplotlib reads its
folder when imported). Brown is prepared once per session, into that cache, by the `brown` fixture.
`make test` with HOME pointing at an empty folder leaves nothing under it from lmbench.
"""

import os
import shutil
import tempfile
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
# Variables naming folders that default under ~, and the session folder each gets.
HOME_DEFAULTS = {"LMBENCH_CACHE": "lmbench-cache", "MPLCONFIGDIR": "matplotlib", "XDG_CACHE_HOME": "cache",
                 "XDG_CONFIG_HOME": "config", "TORCH_HOME": "torch"}


def pytest_configure(config):
    """Point NLTK and the AP pipeline at ../shared when it exists and the variables are unset (read
    only), and every folder in HOME_DEFAULTS at a fresh temporary folder of this session (under
    pytest-xdist: of this worker)."""
    if (SHARED / "nltk_data").is_dir():
        os.environ.setdefault("NLTK_DATA", str(SHARED / "nltk_data"))
    if (SHARED / "corpora" / "ap89").is_dir():
        os.environ.setdefault("AP_DIR", str(SHARED / "corpora" / "ap89"))
    if os.environ.get("PYTEST_XDIST_WORKER"):  # one of several test processes: one thread each, or
        os.environ.setdefault("OMP_NUM_THREADS", "1")  # their torch threads fight over the cores
    config.session_home = Path(tempfile.mkdtemp(prefix="lmbench-tests-"))
    for variable, folder in HOME_DEFAULTS.items():
        os.environ[variable] = str(config.session_home / folder)


def pytest_unconfigure(config):
    home = getattr(config, "session_home", None)
    if home is not None:
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="session")
def session_home(pytestconfig) -> Path:
    """The session's folder that stands in for ~ (the folders of HOME_DEFAULTS are under it)."""
    return pytestconfig.session_home


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(config, items):
    """A test on Brown (the `brown` fixture) is slow: it reads the real corpus. Under pytest-xdist
    (`make test` runs `-n auto --dist loadgroup`) the Brown tests share one worker, so that Brown is
    prepared once."""
    for item in items:
        if "brown" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)
            item.add_marker(pytest.mark.xdist_group("brown"))


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
    """Brown, prepared once per session into the session's cache."""
    if not brown_available():
        pytest.skip("the Brown corpus is not installed (set NLTK_DATA or run nltk.download('brown'))")
    from corpora.brown import load_brown
    return load_brown()
