"""``onebit-dask predict`` and ``onebit-dask evaluate``: a saved model's top-k labels and
test metrics."""

from __future__ import annotations

import json
import sys

from ..metrics.names import METRICS
from ..utils.errors import EXIT_RUNTIME
from .args import (HelpFormatter, UsageError, add_common, add_target, connect,
                   in_process_by_default)

TEXT_ROWS = 10  # rows predict prints as text when --rows is not given


def add_predict(sub):
    p = sub.add_parser("predict", formatter_class=HelpFormatter,
                       help="the top-k labels of observations by a saved model")
    p.add_argument("model", help="a model store written by fit --save")
    p.add_argument("--data", required=True, help="an observations store (its X is scored)")
    p.add_argument("--top-k", type=int, default=5, help="labels per row")
    p.add_argument("--by", choices=("score", "proba"), default="score",
                   help="rank by the score, or by the probability of a positive label (a "
                        "model with a fitted link; the scores printed are then "
                        "probabilities)")
    p.add_argument("--rows", type=int, default=None,
                   help="first rows scored (default: every row with --json, else the first "
                        f"{TEXT_ROWS})")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    add_target(p, default="in-process")
    add_common(p)
    p.set_defaults(run=_run_predict, writes=None)


def add_evaluate(sub):
    p = sub.add_parser("evaluate", formatter_class=HelpFormatter,
                       help="test metrics of a saved model fitted on a synthetic problem")
    p.add_argument("model", help="a model store written by fit --save")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    add_target(p, default="in-process")
    add_common(p)
    p.set_defaults(run=_run_evaluate, writes=None)


def _load_model(args):
    """``(target, attrs)`` of the model store named on the command line, checked."""
    from ..persist import model_store as model_io
    from .client import check_cluster_target

    try:
        target = check_cluster_target(**in_process_by_default(args))
        attrs = model_io.read_attrs(model_io.store_path(args.model))
    except (TypeError, ValueError, FileNotFoundError) as exc:  # includes ModelStoreError
        raise UsageError(str(exc)) from None
    return target, attrs


def _read_model(path, client):
    """The model at ``path``, or ``None`` after one line on stderr when its blocks cannot be
    read (a damaged store: a runtime failure, exit status 1)."""
    from .. import OneBitMultiLabel
    from ..persist.model_store import ModelStoreError

    try:
        return OneBitMultiLabel.load(path, engine="local" if client is None else "dask")
    except ModelStoreError as exc:
        print(f"onebit-dask: error: {exc}", file=sys.stderr)
        return None


def _run_predict(args) -> int:
    from ..data.inputs import read_features

    target, attrs = _load_model(args)
    try:
        if args.top_k < 1 or args.top_k > attrs["n_labels"]:
            raise ValueError(f"--top-k={args.top_k} is not allowed: give 1 <= K <= "
                             f"{attrs['n_labels']} (the model's labels)")
        if args.rows is not None and args.rows < 1:
            raise ValueError(f"--rows={args.rows} is not allowed: give N >= 1")
        if args.by == "proba" and attrs.get("calibration") is None:
            raise ValueError("--by proba is not allowed with this model: it has no fitted "
                             "link (fitted by partial_fit, or a checkpoint before its last "
                             "iteration); use --by score")
        rows = args.rows if args.rows is not None or args.json else TEXT_ROWS
        X = read_features(args.data, n_features=attrs["n_features_in"], rows=rows)
        n = X.shape[0]
    except (TypeError, ValueError, FileNotFoundError) as exc:
        raise UsageError(str(exc)) from None
    with connect(**target, timeout=args.connect_timeout, quiet=True,
                 worker_timeout=args.worker_timeout, debug=args.debug) as client:
        est = _read_model(args.model, client)
        if est is None:
            return EXIT_RUNTIME
        labels, scores = est.predict_top_k(X, args.top_k, by=args.by)
    if args.json:
        text = json.dumps({"model": args.model, "data": args.data, "rows": list(range(n)),
                           "labels": labels.tolist(), "scores": scores.tolist()}) + "\n"
    else:
        shown = "{:.3f}" if args.by == "proba" else "{:+.3f}"  # probabilities are >= 0
        text = "".join(f"row {i}: " + "  ".join(f"{j}:{shown.format(v)}" for j, v in
                                                 zip(labels[i], scores[i])) + "\n"
                       for i in range(n))
    write_whole(text)
    return 0


def write_whole(text: str) -> None:
    """``text`` on stdout, whole or not at all where stdout is a file or a pipe: a Ctrl-C
    while it is written is held back until it is
    (:func:`~onebit_dask.utils.signals.sigint_deferred`; the command then exits 130), so a
    redirected output is never cut in the middle of a row (``predict`` printed row by row:
    a Ctrl-C left the rows before it, issue 36). At a terminal it is written as it is, and
    a Ctrl-C stops it at once."""
    import contextlib

    from ..utils.signals import sigint_deferred

    stream = sys.stdout
    try:
        terminal = stream.isatty()
    except (AttributeError, ValueError):
        terminal = False
    with contextlib.nullcontext() if terminal else sigint_deferred():
        stream.write(text)
        stream.flush()


def _run_evaluate(args) -> int:
    from ..data.synthetic.source import problem_from

    target, attrs = _load_model(args)
    try:
        problem = problem_from(attrs.get("data"))
    except (TypeError, ValueError) as exc:
        raise UsageError(f"model={args.model!r}: its problem cannot be rebuilt ({exc})") from None
    if problem is None:
        raise UsageError(f"model={args.model!r} was not fitted on a synthetic problem (data: "
                         f"{(attrs.get('data') or {}).get('kind')}): evaluate needs its test "
                         "set; use predict")
    with connect(**target, timeout=args.connect_timeout, quiet=True,
                 worker_timeout=args.worker_timeout, debug=args.debug) as client:
        est = _read_model(args.model, client)
        if est is None:
            return EXIT_RUNTIME
        result = est.evaluate(problem)
    result.update(model=args.model, n_steps=est.n_steps_, n_samples=est.n_samples_seen_,
                  d1=est.n_features_in_, d2=est.n_labels_, rank=est.rank)
    if args.json:
        write_whole(json.dumps(result) + "\n")
    else:
        write_whole(f"onebit evaluate {args.model} d1={est.n_features_in_} d2={est.n_labels_} "
                    f"rank={est.rank} steps={est.n_steps_}\n"
                    + "".join(f"  {key:16s} {result[key]:.4f}\n"
                              for key in reversed(METRICS)))  # auc first
    return 0
