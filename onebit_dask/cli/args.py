"""What the command line's verbs share: the parser, the argument types, the options of
where a command runs, and the Dask client it runs on."""

from __future__ import annotations

import argparse
import contextlib
import logging
import math

from . import shipped


class UsageError(Exception):
    """Bad command-line input: reported as one line, exit status 2."""


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage block
        raise UsageError(message)


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each option's default (options without one, or flags, show none)."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False or action.default is argparse.SUPPRESS:
            return action.help
        return super()._get_help_string(action)


class Given(argparse.Action):
    """Store a value and remember that it was given on the command line."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)
        given = set(getattr(namespace, "given", ()))
        setattr(namespace, "given", given | {self.dest})


def seconds(text: str) -> float:
    """A positive, finite number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not allowed: give a positive, finite "
                                         "number of seconds")
    return value


def integer(low: int):
    """An argparse type: an integer ``>= low``."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{text!r} is not allowed: give an integer "
                                             f">= {low}")
        return value
    return parse


def number(low: float, high: float | None = None):
    """An argparse type: a finite number in ``[low, high)`` (``>= low`` without ``high``)."""
    allowed = f"in [{low:g}, {high:g})" if high is not None else f">= {low:g}"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not math.isfinite(value) or value < low or (high is not None and value >= high):
            raise argparse.ArgumentTypeError(f"{text!r} is not allowed: give a number "
                                             f"{allowed}")
        return value
    return parse


def count_or_share(text: str) -> int | float:
    """An argparse type: an integer ``>= 1`` (a count) or a number in ``(0, 1)`` (a share),
    ``OneBitMultiLabel``'s ``query_warmup``."""
    allowed = "give an integer >= 1 (uniform batches) or a number in (0, 1) (their share)"
    try:
        return integer(1)(text)
    except argparse.ArgumentTypeError:
        pass
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not allowed: {allowed}") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not allowed: {allowed}")
    return value


def positive_rate(text: str) -> str:
    """An argparse type: ``none``, a rate ``P`` or a range ``P_MIN:P_MAX`` (checked by
    :func:`onebit_dask.synthetic.parse_positive_rate`, kept as text)."""
    from ..data.synthetic.problem import parse_positive_rate

    try:
        parse_positive_rate(text)
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not allowed: give none, a rate P with 0 < P < 1, or a range "
            "P_MIN:P_MAX with 0 < P_MIN <= P_MAX < 1") from None
    return text


def add_common(p) -> None:
    p.add_argument("--debug", action="store_true",
                   help="show the traceback of a failure (and Dask's log messages)")


@contextlib.contextmanager
def connect(*, debug: bool, **options):
    """:func:`onebit_dask.session.open_client` with Dask's log lines silenced (unless
    ``--debug``) while it is open: a failure is then one line."""
    from .client import open_client

    saved = {}
    if not debug and options.get("workers") != 0:  # in-process: distributed not imported
        import distributed  # noqa: F401  (its loggers exist once it is imported)

        names = {"distributed", "tornado", "bokeh"} | {
            n for n in logging.root.manager.loggerDict
            if n.split(".")[0] in ("distributed", "tornado", "bokeh")}
        for name in names:
            logger = logging.getLogger(name)
            saved[logger] = logger.level
            logger.setLevel(logging.CRITICAL + 1)
    try:
        with open_client(debug=debug, **options) as client:
            yield client
    finally:
        for logger, level in saved.items():
            logger.setLevel(level)


def add_target(p, default="an embedded LocalCluster, one worker a core"):
    g = p.add_argument_group(f"where it runs (default: {default})")
    g.add_argument("--workers", type=integer(0), default=None,
                   help="embedded LocalCluster of N worker processes on 127.0.0.1; 0: "
                        "in-process")
    g.add_argument("--scheduler", default=None, help="address of a running scheduler, "
                   "tcp://HOST:PORT or tls://HOST:PORT")
    g.add_argument("--cluster", default=None, help="a cluster config file, or the name of a "
                   "shipped one (onebit-dask list), e.g. local")
    g.add_argument("--tls-ca-file", default=None, help="CA certificate for a tls:// scheduler")
    g.add_argument("--tls-cert", default=None, help="client certificate for a tls:// scheduler")
    g.add_argument("--tls-key", default=None, help="client key for a tls:// scheduler")
    g.add_argument("--connect-timeout", type=seconds, default=10.0,
                   help="seconds to wait for the scheduler")
    g.add_argument("--worker-timeout", type=seconds, default=120.0,
                   help="seconds to wait for the first worker to join (a batch queue may "
                        "need longer)")


def target_of(args) -> dict:
    tls = None
    if any((args.tls_ca_file, args.tls_cert, args.tls_key)):
        tls = {"ca_file": args.tls_ca_file, "cert": args.tls_cert, "key": args.tls_key}
    cluster = None if args.cluster is None else shipped.resolve("cluster", args.cluster)
    return dict(workers=args.workers, scheduler=args.scheduler, cluster=cluster, tls=tls,
                allow_large=getattr(args, "allow_large", False))



def in_process_by_default(args) -> dict:
    target = target_of(args)
    if target["workers"] is None and target["scheduler"] is None and target["cluster"] is None:
        target["workers"] = 0
    return target
