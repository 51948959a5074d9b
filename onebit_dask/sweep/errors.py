"""Errors of sweep specs (their own module so that spec, noise and methods import it
without importing each other)."""


class SpecError(ValueError):
    """A sweep spec that cannot run; the message names the key."""


class SweepRuntimeError(RuntimeError):
    """A failure while a sweep runs (a store in use, damaged or on a full disk): the
    message names what failed and what to do; the command exits 1."""
