"""Time to accuracy: frobenius error and AUC against training seconds, per method.

    python benchmarks/bench_accuracy.py                           # every method, 300 s each
    python benchmarks/bench_accuracy.py --methods leml            # one method alone
    python benchmarks/bench_accuracy.py --methods onebit-paper --samplers explicit
    python benchmarks/bench_accuracy.py --plot-only               # table + figure from the JSON
    python benchmarks/bench_accuracy.py --smoke                   # tiny sizes, seconds

Paper setting by default (d1=500, d2=200, k=3, batches of m=100000, flip=0.05, seed 0,
10000 test instances), in this process. Every point is (training seconds, frobenius
error, AUC on the problem's test set); the evaluation is never inside the seconds.

* ``onebit-paper``, ``onebit-averaged`` (one per ``--samplers`` value): one fit streaming
  fresh batches, one core (one BLAS thread), ``eval_every=1``; a point per iteration at
  its ``history_`` ``fit_s``: the cumulative time of the initialisation and the steps,
  which *includes drawing the synthetic batches* (the shards are drawn inside the steps)
  and excludes the test metrics (computed between steps). A first fit runs
  ``--dense-iter`` iterations; if it ended under ``--budget`` a second fit of the same
  data and seed (so the same numbers, which is checked) runs as many iterations as the
  first one's time per step (over its second half) fits into 1.1 x the budget,
  evaluated about ``--late-points`` times.
* ``leml``, ``ovr``: independent fits on the first ``n`` explicit observations for
  growing ``n`` (``--sizes``; below ``m`` one batch of ``n``, else ``n / m`` whole
  batches), given in memory; a point per fit at its training time. Drawing the
  observations is timed apart (``draw_s``) and is *not* in the seconds. The next size
  runs only while ``last time x n_next / n_last`` is within the budget. LEML as
  bench_peers runs it (rank k, ``lambda`` from its grid by a 10 % validation split, all
  BLAS threads), one-vs-rest logistic regression with one BLAS thread.

Each method's trace goes to ``--out/<method>.json``; the table and the figure are made
from every JSON file there.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import math
import os
import pathlib
import sys
import tempfile
import time

from threadpoolctl import threadpool_limits

from onebit_dask import OneBitMultiLabel, SyntheticProblem, metrics
from onebit_dask.baselines import LEML, OneVsAll

ROOT = pathlib.Path(__file__).resolve().parents[1]
STEPS = ("paper", "averaged")
PEERS = {"leml": "LEML (lambda by validation)", "ovr": "one-vs-rest logistic, 1 thread"}
METHODS = tuple(f"onebit-{s}" for s in STEPS) + tuple(PEERS)
MARKS = (10.0, 60.0, 300.0)
OVERSHOOT = 1.1  # the second one-bit fit aims at this times the budget


# -- runs ---------------------------------------------------------------------------------
def onebit_trace(problem, step, args) -> dict:
    """One-bit fits on ``problem`` (its sampler); points at ``history_`` ``fit_s``."""

    def fit(n_iter, eval_every):
        est = OneBitMultiLabel(problem.rank, batch_size=args.batch_size, n_iter=n_iter,
                               step=step, n_shards=args.shards, random_state=0,
                               eval_every=eval_every)
        return est.fit(problem).history_

    start = time.perf_counter()
    dense = fit(args.dense_iter, 1)
    points = [_onebit_point(h, 1) for h in dense]
    # time per step over the second half of the first fit (later steps are cheaper when
    # the residuals thin out); the second fit aims a little past the budget
    half = dense[len(dense) // 2]
    per_step = (dense[-1]["fit_s"] - half["fit_s"]) / max(args.dense_iter - half["iteration"], 1)
    n_iter = min(args.max_iter, args.dense_iter + int(
        (OVERSHOOT * args.budget - dense[-1]["fit_s"]) / max(per_step, 1e-9)))
    same = None
    if n_iter > args.dense_iter:
        late = fit(n_iter, max(1, math.ceil(n_iter / args.late_points)))
        evaluated = {h["iteration"]: h for h in late if "auc" in h}
        # the same data and seed: the iterations both fits evaluated must agree exactly
        same = all(evaluated[h["iteration"]]["frobenius_error"] == h["frobenius_error"]
                   for h in dense if h["iteration"] in evaluated)
        points += [_onebit_point(h, 2) for h in evaluated.values()
                   if h["iteration"] > args.dense_iter]
    return {"kind": "onebit", "step": step, "sampler": problem.sampler, "points": points,
            "fits": 1 if same is None else 2, "second_fit_matches_first": same,
            "seconds_per_step": per_step, "wall_s": time.perf_counter() - start}


def _onebit_point(h, fit) -> dict:
    return {"seconds": h["fit_s"], "frobenius_error": h["frobenius_error"], "auc": h["auc"],
            "iteration": h["iteration"], "n_obs": h["n_samples"], "n_active": h["n_active"],
            "fit": fit}


def peer_trace(problem, name, args) -> dict:
    """Independent fits of a peer on growing numbers of explicit observations."""
    test, truth = problem.test_set(), problem.truth
    points, start, last = [], time.perf_counter(), None
    for n in args.sizes:
        if last is not None and last["seconds"] * n / last["n_obs"] > args.budget:
            break
        t0 = time.perf_counter()
        X, labels, y = observations(problem, n, args.batch_size, args.shards)
        draw_s = time.perf_counter() - t0
        peer, threads = (LEML(args.rank), None) if name == "leml" else (OneVsAll(), 1)
        with threadpool_limits(threads, user_api="blas"):
            t0 = time.perf_counter()
            peer.fit(X, labels, y, n_labels=args.d2)
            seconds = time.perf_counter() - t0
        del X, labels, y
        result = metrics.evaluate(test, truth, peer.A_, peer.B_)
        last = {"seconds": seconds, "frobenius_error": result["frobenius_error"],
                "auc": result["auc"], "n_obs": n, "draw_s": draw_s}
        points.append(last)
        print(f"#   {name} n={n}: {seconds:.1f} s (+{draw_s:.1f} s drawing), "
              f"frobenius {last['frobenius_error']:.4f}, auc {last['auc']:.4f}", flush=True)
    return {"kind": name, "points": points, "wall_s": time.perf_counter() - start,
            "blas_threads": threads if threads else "all"}


def observations(problem, n, batch_size, n_shards):
    """The first ``n`` explicit observations: one batch of ``n`` below ``batch_size``, else
    whole batches (``n`` rounded up to a multiple of ``batch_size``)."""
    if n < batch_size:
        return problem.draw_batches([0], n, n_shards)
    return problem.draw_batches(range(math.ceil(n / batch_size)), batch_size, n_shards)


# -- table and figure ---------------------------------------------------------------------
def load(out: pathlib.Path) -> list[dict]:
    """Every trace in ``out``: one-bit first (projected, explicit, other samplers; paper
    before averaged), then the peers."""
    runs = [json.loads(p.read_text()) for p in sorted(out.glob("*.json"))]
    order = {"projected": 0, "explicit": 1}
    return sorted(runs, key=lambda r: (r["kind"] != "onebit", order.get(r.get("sampler"), 2),
                                       r.get("sampler", ""), r.get("step") != "paper",
                                       r["kind"]))


def reached(points, seconds):
    """The point with the most observations among those within ``seconds`` (a one-bit
    fit's state at that time; a peer's largest fit done in that time), or ``None``."""
    within = [p for p in points if p["seconds"] <= seconds]
    return max(within, key=lambda p: p["n_obs"]) if within else None


def first_below(points, threshold):
    """The earliest point with frobenius error <= ``threshold``, or ``None``."""
    below = [p for p in points if p["frobenius_error"] <= threshold]
    return min(below, key=lambda p: p["seconds"]) if below else None


def table(runs, thresholds) -> str:
    head = ["method"] + [f"frob / AUC within {m:g} s" for m in MARKS] + [
        f"s to frob <= {t:g}" for t in thresholds]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for run in runs:
        cells = [run["label"]]
        for mark in MARKS:
            p = reached(run["points"], mark)
            cells.append("-" if p is None else f"{p['frobenius_error']:.4f} / {p['auc']:.6f}")
        for thr in thresholds:
            p = first_below(run["points"], thr)
            if p is None:
                cells.append("not reached")
            elif "draw_s" in p:
                cells.append(f"{p['seconds']:.2f} (+{p['draw_s']:.1f} drawing)")
            else:
                cells.append(f"{p['seconds']:.2f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def figure(runs, path: pathlib.Path, thresholds, setting: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    colors = {"paper": "tab:blue", "averaged": "tab:green", "leml": "tab:red",
              "ovr": "tab:purple"}
    lines = {"projected": "-", "explicit": "--"}
    fig, (ax_f, ax_a) = plt.subplots(1, 2, figsize=(13, 5.2))
    for run in runs:
        pts = sorted(run["points"], key=lambda p: p["n_obs"])
        t = [p["seconds"] for p in pts]
        if run["kind"] == "onebit":
            look = dict(color=colors.get(run["step"]), lw=1.6, marker=".", ms=3,
                        linestyle=lines.get(run["sampler"], ":"))
        else:
            look = dict(color=colors[run["kind"]], lw=1.2, marker="o", ms=6,
                        linestyle="-", markerfacecolor="none")
        ax_f.plot(t, [p["frobenius_error"] for p in pts], label=run["label"], **look)
        ax_a.plot(t, [p["auc"] for p in pts], label=run["label"], **look)
    for thr in thresholds:
        ax_f.axhline(thr, color="grey", lw=0.6, alpha=0.5)
    for ax in (ax_f, ax_a):
        for mark in MARKS:
            ax.axvline(mark, color="black", lw=0.7, ls=":", alpha=0.6)
        ax.set_xscale("log")
        ax.set_xlabel("training seconds (log; onebit: drawing its batches included; "
                      "peers: not)", fontsize=8)
        ax.grid(True, which="both", alpha=0.25)
    ax_f.set(yscale="log", ylabel="frobenius_error (RMS column error, log)",
             title="recovery error vs training time")
    ax_f.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax_f.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax_f.yaxis.set_minor_formatter(NullFormatter())
    for ax in (ax_f, ax_a):
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax_a.set_yscale("logit")
    ax_a.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.6g}"))
    ax_a.yaxis.set_minor_formatter(NullFormatter())
    ax_a.set(ylabel="AUC (logit scale)", title="test AUC vs training time")
    ax_f.legend(fontsize=8, loc="lower left")
    fig.suptitle(f"Time to accuracy: {setting}; dotted verticals at 10, 60, 300 s",
                 fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


# -- command line -------------------------------------------------------------------------
def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    p.add_argument("--samplers", nargs="+", default=["projected", "explicit"],
                   help="one-bit samplers (SyntheticProblem(sampler=...) checks them)")
    p.add_argument("--d1", type=int, default=500)
    p.add_argument("--d2", type=int, default=200)
    p.add_argument("--rank", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=100_000)
    p.add_argument("--flip", type=float, default=0.05)
    p.add_argument("--shards", type=int, default=4)
    p.add_argument("--n-test", type=int, default=10_000)
    p.add_argument("--budget", type=float, default=300.0, help="training seconds per method")
    p.add_argument("--dense-iter", type=int, default=60,
                   help="one-bit iterations evaluated one by one")
    p.add_argument("--max-iter", type=int, default=100_000)
    p.add_argument("--late-points", type=int, default=40,
                   help="evaluations of the second one-bit fit")
    p.add_argument("--sizes", nargs="+", type=float,
                   default=[1e4, 3e4, 1e5, 3e5, 1.1e6, 3.3e6],
                   help="observations of the peers' fits (3.3e6 x 500 float32 is 6.6 GB)")
    p.add_argument("--thresholds", nargs="+", type=float, default=[0.3, 0.2, 0.1, 0.05, 0.02, 0.01])
    p.add_argument("--out", type=pathlib.Path, default=None,
                   help="directory of the JSON traces (default docs/time_to_accuracy; with "
                        "--smoke a new temporary directory)")
    p.add_argument("--figure", type=pathlib.Path, default=None,
                   help="default docs/time_to_accuracy.png (with --smoke: OUT/figure.png)")
    p.add_argument("--plot-only", action="store_true")
    p.add_argument("--smoke", action="store_true")
    args = p.parse_args(argv)
    if args.smoke:
        args.d1, args.d2, args.batch_size, args.n_test = 30, 15, 3000, 500
        args.budget, args.dense_iter, args.max_iter, args.late_points = 1.0, 3, 30, 5
        args.sizes = [500, 1500, 3000, 6000]
    if args.out is None:
        args.out = (pathlib.Path(tempfile.mkdtemp(prefix="bench_accuracy_smoke_"))
                    if args.smoke else ROOT / "docs" / "time_to_accuracy")
    if args.figure is None:
        args.figure = (args.out / "figure.png" if args.smoke
                       else ROOT / "docs" / "time_to_accuracy.png")
    args.sizes = [int(n) for n in args.sizes]
    return args


def main(argv=None):
    args = parse(argv)
    setting = (f"d1={args.d1} d2={args.d2} k={args.rank} m={args.batch_size} "
               f"flip={args.flip}, in-process")
    if not args.plot_only:
        try:  # every sampler is checked before any work
            base = SyntheticProblem(args.d1, args.d2, args.rank, flip=args.flip, seed=0,
                                    n_test=args.n_test)
            problems = {s: dataclasses.replace(base, sampler=s) for s in args.samplers}
        except ValueError as err:
            print(f"bench_accuracy.py: error: {err}", file=sys.stderr)
            return 2
        args.out.mkdir(parents=True, exist_ok=True)
        print(f"# {setting}; budget {args.budget:g} s per method", flush=True)
        for method in args.methods:
            if method.startswith("onebit-"):
                step = method.removeprefix("onebit-")
                runs = [(f"{method}-{s}", f"onebit, {step} step, {s}",
                         lambda pr=pr, st=step: onebit_trace(pr, st, args))
                        for s, pr in problems.items()]
            else:
                runs = [(method, PEERS[method], lambda m=method: peer_trace(base, m, args))]
            for key, label, run in runs:
                load_before, cpu_before = os.getloadavg()[0], time.process_time()
                result = {"method": key, "label": label, **run(), "setting": setting,
                          "budget_s": args.budget,
                          "date": datetime.date.today().isoformat()}
                # how busy the machine was: other processes slow a timed run down
                result["load_average_1min"] = [load_before, os.getloadavg()[0]]
                result["cpu_s"] = time.process_time() - cpu_before
                (args.out / f"{key}.json").write_text(json.dumps(result, indent=1))
                last = result["points"][-1]
                print(f"# {key}: {len(result['points'])} points, last at "
                      f"{last['seconds']:.1f} s: frobenius {last['frobenius_error']:.4f}, "
                      f"auc {last['auc']:.4f} (wall {result['wall_s']:.0f} s, cpu "
                      f"{result['cpu_s']:.0f} s)", flush=True)
    runs = load(args.out)
    if not runs:
        print(f"bench_accuracy.py: error: no JSON trace in {args.out}: run the benchmark "
              "first", file=sys.stderr)
        return 1
    print(table(runs, args.thresholds))
    figure(runs, args.figure, args.thresholds, runs[0]["setting"])
    print(f"# figure: {args.figure}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
