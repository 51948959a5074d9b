"""The fits both files of tests/persist compare with, and the cluster they run on."""

import pytest

from tests.support.models import EXPLICIT, fit_reference


@pytest.fixture(scope="module")
def reference():
    """The uninterrupted fit, in this process, without checkpoints."""
    return fit_reference()


@pytest.fixture(scope="module")
def explicit_reference():
    return fit_reference(EXPLICIT)


@pytest.fixture
def cluster(client2):
    """The session's 2-worker cluster (tests/conftest.py)."""
    return client2
