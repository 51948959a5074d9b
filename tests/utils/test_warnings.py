"""The package's blocks that ignore warnings: what they ignore, and two threads' blocks
never overlapping (overlapping ``catch_warnings`` blocks put back each other's filters)."""

import threading
import warnings

import pytest

from onebit_dask.utils.warnings import ignored


def test_a_block_ignores_its_warnings_only_and_puts_the_filters_back():
    before = list(warnings.filters)
    with pytest.warns(UserWarning, match="other"):
        with ignored(dict(message="Sending large graph", category=UserWarning)):
            warnings.warn("Sending large graph of size 12 MiB", UserWarning)  # ignored
            warnings.warn("other", UserWarning)
    assert warnings.filters == before


def test_another_threads_block_waits_and_the_filters_come_back():
    """Thread 2's block starts only once thread 1's has ended, so each puts back what it
    found. (Overlapping, thread 1 would put back the filters from before both, and thread
    2 those with thread 1's filter in them, for good: the last check fails.) The 0.2 s
    wait can only miss an overlap on a loaded machine, never see one that is not there."""
    before = list(warnings.filters)
    entered = threading.Event()

    def other():
        with ignored(dict(message="b")):
            entered.set()

    with ignored(dict(message="a")):
        thread = threading.Thread(target=other)
        thread.start()
        assert not entered.wait(0.2)  # waiting for this block
    thread.join(timeout=60)
    assert entered.is_set() and not thread.is_alive()
    assert warnings.filters == before
