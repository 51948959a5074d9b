"""The package's exceptions, at the bottom of the layers (this module imports nothing of
the package), and what the command line does with them.

Bad input, found before any work starts (the CLI exits 2 with one line):

- ``ValueError`` and ``TypeError`` naming the parameter, the value and what is allowed
  (:mod:`onebit_dask._validation`), and their subclasses here: :class:`SpecError`,
  :class:`ClusterConfigError`.

Failures at run time (the CLI exits 1 with one line, the message as written):

- :class:`RunError` and its subclasses: :class:`SweepRuntimeError`,
  :class:`ClusterStartError`, :class:`StoreAccessError`, and a damaged store's error
  (which subclasses :class:`RunError` too).
"""

EXIT_OK, EXIT_RUNTIME, EXIT_USAGE = 0, 1, 2


class RunError(RuntimeError):
    """A failure at run time whose message names what failed and what to do."""


class SpecError(ValueError):
    """A sweep spec that cannot run; the message names the file and the key."""


class SweepRuntimeError(RunError):
    """A failure while a sweep runs (a store in use, damaged or on a full disk): the
    message names what failed and what to do."""


class ClusterConfigError(ValueError):
    """A cluster config that cannot be used; the message names the key."""


class ClusterStartError(RunError):
    """A checked config whose cluster did not start; the message says what to do."""


class StoreAccessError(RunError):
    """A process (a Dask worker, or this one) that cannot reach a store at a URL: no
    credentials, no endpoint, access denied; the message names the process and what it
    lacks."""
