"""Shared fixtures of the idem package's tests.

ctest runs each test file with PYTHONPATH=build/python (python/CMakeLists.txt);
run by hand, the tests import idem from the checkout's build/python when it
is not installed.
"""

import os
import pathlib
import sys

import pytest

SOURCE_DIR = pathlib.Path(
    os.environ.get("IDEM_SOURCE_DIR",
                   pathlib.Path(__file__).resolve().parents[2]))

try:
    import idem  # noqa: F401
except ImportError:
    sys.path.insert(0, str(SOURCE_DIR / "build" / "python"))


@pytest.fixture
def store(tmp_path):
    """A path for a new store."""
    return str(tmp_path / "store")


@pytest.fixture
def engine(store):
    """An open engine on a new store, closed after the test."""
    import idem
    with idem.Engine.open(store) as e:
        yield e
