"""A step of one label block against its floor (issue 39 item 3).

One label block of a planted problem (``d1 = 100``, rank 3, the default conditional
sampler, ``batch_size = 4 d2``: the 4 observations per label of docs/SCALING.md's
``10^7``-label run) is fitted in this process on one core (``engine="local"``,
``n_shards=1``, no evaluation), and each step is timed through the package's own block
functions, stage by stage::

    OMP_NUM_THREADS=1 python benchmarks/bench_step_floor.py --d2 1000000

Stages (nested timers around the package's functions; ``other`` is the rest of the
step: the client's ``l x l`` algebra, the engine, Python):

* ``draw``: the conditional sampler's draw of the block's batch
  (:func:`~onebit_dask.data.synthetic.conditional.draw_conditional_step`), of which
  ``draw: complete_rows`` is the ``d1`` normals of each active label and their
  projection (:func:`~onebit_dask.data.synthetic.draws.complete_rows`);
* ``products``: the dilation products of rounds 1 and 3
  (``blocks._product``: ``X^T (w P[j])``, ``X P_top``, the scatter into ``d2 x l``,
  ``B (A^T P)`` and ``B^T P``);
* ``grams``: ``Y^T Y`` of round 1; ``transform``: the CholQR products of round 2
  (``Y R^{-1}`` and its Gram); ``close: Y R^-1 + commit``: the rest of round 3.

The floor, measured in the same run on the same shapes: the normal draws of the step's
active labels (``n_active x d1`` float32, as the sampler draws them) plus one pass of
the ``d2 x l`` and ``n_active x d1 x l`` products each of the step's three rounds
needs at least (round 1: ``X P_top``, ``X^T P[j]``, ``B M``, ``Z^T Z``; round 2:
``Y M``, its Gram; round 3: as round 1). The ratio is step / floor, of the median
step after the first ``--warmup`` (its stages add up to it). ``--smoke``: a few
seconds at ``d2 = 20 000``.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import json
import pstats
import time
from collections import defaultdict

import numpy as np

from onebit_dask import OneBitMultiLabel, SyntheticProblem
from onebit_dask.data.synthetic import conditional, problem as problem_mod
from onebit_dask.engine import blocks
from onebit_dask.fit import loop

TIMES: dict = defaultdict(float)
ACTIVE: list = []

STAGES = [  # (label, module, attribute)
    ("round 1: step_open", blocks, "step_open"),
    ("round 2: transform", blocks, "transform"),
    ("round 3: step_close", blocks, "step_close"),
    ("draw", problem_mod, "draw_conditional_step"),
    ("draw: complete_rows", conditional, "complete_rows"),
    ("products", blocks, "_product"),
    ("commit", blocks, "commit"),
]


def _timed(label, fn):
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            elapsed = time.perf_counter() - start
            TIMES[label] += elapsed
            if label == "products":  # once in round 1, once in round 3
                TIMES["products " + ("open" if "products open" not in TIMES
                                     else "close")] = elapsed
    return wrapper


@contextlib.contextmanager
def stage_timers():
    saved = [(mod, name, getattr(mod, name)) for _, mod, name in STAGES]
    for (label, mod, name), (_, _, fn) in zip(STAGES, saved):
        setattr(mod, name, _timed(label, fn))
    draw = problem_mod.draw_conditional_step

    def counting(*args, **kwargs):
        active, n_active = draw(*args, **kwargs)
        ACTIVE.append((active.labels.size, n_active))
        return active, n_active
    problem_mod.draw_conditional_step = counting
    try:
        yield
    finally:
        for mod, name, fn in saved:
            setattr(mod, name, fn)


def fit_steps(d1, d2, rank, batch_size, n_iter, profile=None, threshold="auto"):
    """Per step: the stage times (s) and ``(active labels, active rows)``."""
    problem = SyntheticProblem(d1, d2, rank, seed=0, n_test=100, max_eval_labels=100)
    est = OneBitMultiLabel(rank, batch_size=batch_size, n_iter=n_iter, n_shards=1,
                           engine="local", eval_every=0, random_state=0,
                           threshold=threshold)
    per_step = []
    original = loop.step

    def step(*args, **kwargs):
        TIMES.clear()
        if profile is not None and len(per_step) == n_iter - 1:
            profile.enable()
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            TIMES["step"] = time.perf_counter() - start
            if profile is not None:
                profile.disable()
            per_step.append(dict(TIMES))

    loop.step = step
    try:
        with stage_timers():
            est.fit(problem)
    finally:
        loop.step = original
    return per_step, ACTIVE[-len(per_step):], est


def floor_times(d1, d2, rank, n_labels_active, repeats, seed=0):
    """The floor's pieces (s, medians of ``repeats``) on the step's shapes."""
    width = 2 * rank
    rng = np.random.default_rng(seed)
    n = n_labels_active
    B = rng.standard_normal((d2, width))
    M = rng.standard_normal((width, width))
    P_top = rng.standard_normal((d1, width))
    at = np.sort(rng.choice(d2, n, replace=False))

    def normals():
        return rng.standard_normal((n, d1), dtype=np.float32)

    X = normals().astype(np.float64)

    def rows_products():  # X P_top and X^T P[j]: the active rows' two products of a round
        X @ P_top
        X.T @ B[at]

    def label_products():  # one d2 x l product and its Gram
        Z = B @ M
        Z.T @ Z

    pieces = {"normals (n_active x d1 float32)": (normals, 1),
              "rows products (x2 rounds)": (rows_products, 2),
              "d2 x l products (x3 rounds)": (label_products, 3)}
    out = {}
    for label, (fn, times) in pieces.items():
        t = []
        for _ in range(repeats):
            start = time.perf_counter()
            fn()
            t.append(time.perf_counter() - start)
        out[label] = times * float(np.median(t))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d1", type=int, default=100)
    ap.add_argument("--d2", type=int, default=1_000_000)
    ap.add_argument("--rank", type=int, default=3)
    ap.add_argument("--per-label", type=float, default=4.0,
                    help="observations per label a step (batch_size = per_label * d2)")
    ap.add_argument("--n-iter", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=1, help="first steps left out of the medians")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--profile", action="store_true", help="cProfile the last step")
    ap.add_argument("--threshold", default="auto",
                    help="the model's thresholds (the estimator's parameter; 'none': the "
                    "paper's model, whose conditional draw is the balanced arcs)")
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.smoke:
        args.d2, args.n_iter, args.warmup, args.repeats = 20_000, 2, 0, 1
        args.json = True
    batch = int(args.per_label * args.d2)
    prof = cProfile.Profile() if args.profile else None
    per_step, active, _ = fit_steps(args.d1, args.d2, args.rank, batch, args.n_iter, prof,
                                  args.threshold)
    kept = slice(args.warmup, None)
    labels = sorted(per_step[0])
    # the median step (by its total; the upper median of an even count), whole: its
    # stages add up to it
    order = sorted(range(len(per_step))[kept], key=lambda i: per_step[i]["step"])
    at = order[len(order) // 2]
    med = {k: per_step[at].get(k, 0.0) for k in labels}
    n_active = int(active[at][0])
    floor = floor_times(args.d1, args.d2, args.rank, n_active, args.repeats)
    floor_total = sum(floor.values())
    step = med["step"]
    draw, comp = med.get("draw", 0.0), med.get("draw: complete_rows", 0.0)
    prods, commit = med.get("products", 0.0), med.get("commit", 0.0)
    r1, r2, r3 = (med.get(k, 0.0) for k in ("round 1: step_open", "round 2: transform",
                                            "round 3: step_close"))
    table = [
        ("draw: complete_rows (d1 normals + projection)", comp),
        ("draw: the rest (counts, plane, arcs, in-plane rows)", draw - comp),
        ("products (rounds 1 and 3)", prods),
        ("round 1 rest (activate bookkeeping, Y^T Y)", r1 - draw - med["products open"]),
        ("round 2: transform (Y R^-1, Gram)", r2),
        ("round 3 rest (Y R^-1, commit)", r3 - med["products close"]),
        ("other (client l x l algebra, engine)", step - r1 - r2 - r3),
    ]
    totals = ", ".join(f"{s['step']:.2f}" for s in per_step)
    print(f"threshold {args.threshold}  rows drawn active {int(active[at][1])}")
    print(f"d1 {args.d1}  d2 {args.d2}  rank {args.rank}  batch {batch}  "
          f"active labels {n_active} ({n_active / args.d2:.0%})  steps {len(per_step)} "
          f"(step {at + 1}: the median of steps {args.warmup + 1}-{len(per_step)}, "
          f"{totals} s)")
    print(f"{'stage':52s} {'s':>7s} {'share':>6s}")
    for label, t in table:
        print(f"{label:52s} {t:7.3f} {t / step:6.1%}")
    print(f"{'step':52s} {step:7.3f}")
    print("floor (same run):")
    for label, t in floor.items():
        print(f"  {label:50s} {t:7.3f}")
    print(f"{'floor':52s} {floor_total:7.3f}")
    print(f"step / floor {step / floor_total:.2f}; commit {commit:.3f} s; per label: step "
          f"{step / args.d2 * 1e6:.2f} us, floor {floor_total / args.d2 * 1e6:.2f} us")
    if prof is not None:
        pstats.Stats(prof).sort_stats("tottime").print_stats(15)
    if args.json:
        print(json.dumps({"d2": args.d2, "batch": batch, "n_active": n_active,
                          "stages": med, "floor": floor, "step_s": step,
                          "floor_s": floor_total, "ratio": step / floor_total,
                          "steps": len(per_step)}))


if __name__ == "__main__":
    main()
