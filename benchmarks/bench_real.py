"""Real multi-label data from one-bit feedback: every method on the same bits.

For each data set (XC text files, train and test) and seed, ``--bits`` (instance, label)
pairs are drawn uniformly from the training label matrix; each bit is ``2 Y_ij - 1``.
Every method sees the same bits. The baselines get the features standardised with the
training split's mean and deviation (``--whiten`` also whitens them) as a dense array.
The one-bit models (``paper``, ``thresholded``) get the raw features (CSR, as read) and
the same map through the estimator's ``features`` parameter (``--whiten top:Q``:
``features="whiten", whiten_components=Q``; ``none``: ``features="standardize"``),
estimated from the rows of their bits and applied through the factors; ``--feature-path
prewhiten`` gives them the baselines' dense transformed features instead
(``features="none"``), to compare. ``defaults`` is the estimator with every default
(``features="auto"``, ``step="auto"``) on the raw rows of the bits; ``defaults_proba``
the same model ranked by its probabilities (``predict_proba``,
``predict_top_k(by="proba")``); ``pooled`` the defaults with ``step="pooled"`` (every
step the initial estimate of all the batches so far, docs/ALGORITHM.md section 9f).
Reported on the test split: macro AUC (labels with both
classes), P@1/3/5 and the training time (the map's estimation included), means over
seeds. The upper bound is one-vs-rest logistic regression on the full training label
matrix::

    python benchmarks/bench_real.py --data-dir ../shared/data --seeds 5
    python benchmarks/bench_real.py --sets emotions --seeds 1 --whiten top:200
    python benchmarks/bench_real.py --sets emotions --seeds 1 --whiten top:200 \
        --feature-path prewhiten --methods paper thresholded
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np
from sklearn.covariance import ledoit_wolf
from sklearn.linear_model import LogisticRegression

from onebit_dask import OneBitMultiLabel
from onebit_dask.baselines import LEML, ColumnwiseOneBit
from onebit_dask.io.xc import read_xc
from onebit_dask.metrics import auc_rows
from onebit_dask.metrics.ranking import top_k_metrics

SETS = ("bibtex", "enron", "yeast", "scene", "emotions")
METHODS = ("popularity", "centroid", "centroid_rank", "leml", "ovr_bits", "paper", "defaults",
           "pooled", "thresholded", "thresholded_oneshot", "thresholded_val", "ovr_full")


class _Popularity:
    """Every instance gets the labels' shares of positive bits as scores."""

    def fit(self, X, labels, y, n_labels):
        pos = np.bincount(labels, weights=y > 0, minlength=n_labels)
        self.share_ = pos / np.maximum(np.bincount(labels, minlength=n_labels), 1)
        return self

    def decision_function(self, X):
        return np.broadcast_to(self.share_, (X.shape[0], self.share_.size))


class _OneVsRestBits:
    """One logistic regression (with an intercept) per label on that label's bits."""

    def fit(self, X, labels, y, n_labels):
        self.W_, self.b_ = np.zeros((X.shape[1], n_labels)), np.zeros(n_labels)
        for j in range(n_labels):
            rows = labels == j
            yj = y[rows]
            if np.unique(yj).size < 2:
                self.b_[j] = -10.0 if (yj.size == 0 or yj[0] < 0) else 10.0
                continue
            clf = LogisticRegression(max_iter=300).fit(X[rows], yj)
            self.W_[:, j], self.b_[j] = clf.coef_[0], clf.intercept_[0]
        return self

    def decision_function(self, X):
        return X @ self.W_ + self.b_


class _TruncatedCentroid:
    """The centroid's unit columns ``colnorm(sum y x)``, truncated to its ``rank`` leading
    singular directions (then normalised again): the centroid at the one-bit models' rank."""

    def __init__(self, rank):
        self.rank = rank

    def fit(self, X, labels, y, n_labels):
        W = ColumnwiseOneBit().fit(X, labels, y, n_labels=n_labels).coef_
        U, s, Vt = np.linalg.svd(W, full_matrices=False)
        W = (U[:, :self.rank] * s[:self.rank]) @ Vt[:self.rank]
        norms = np.linalg.norm(W, axis=0)
        self.W_ = W / np.where(norms > 0, norms, 1.0)
        return self

    def decision_function(self, X):
        return X @ self.W_


def _ovr_full(X, Y):
    model = _OneVsRestBits()
    n, d2 = Y.shape
    model.W_, model.b_ = np.zeros((X.shape[1], d2)), np.zeros(d2)
    for j in range(d2):
        if 0 < Y[:, j].sum() < n:
            clf = LogisticRegression(max_iter=300).fit(X, Y[:, j])
            model.W_[:, j], model.b_[j] = clf.coef_[0], clf.intercept_[0]
        else:
            model.b_[j] = 10.0 if Y[0, j] else -10.0
    return model


def _with_validation(features, Y_train, rank, n_bits, n_iter, step, seed, eval_set=None,
                     mapping=None):
    """The thresholded model keeping its best iterate (``validation_fraction=1``) within the
    same ``n_bits``: ``n_iter + 2`` batches, the last one the validation bits, drawn from a
    tenth of the training instances that the training bits never see (bits of the same
    instances would overlap the training pairs: at 110 000 bits a small set's
    ``n x d2`` cells are each observed several times). ``features``: the training
    instances' rows (dense, or CSR with a ``mapping`` of the estimator's feature map)."""
    n, d2 = Y_train.shape
    m = n_bits // (n_iter + 2)
    rng = np.random.default_rng([seed, 1])
    order = rng.permutation(n)
    held, kept = order[: n // 10], order[n // 10:]
    i = np.concatenate([kept[rng.integers(0, kept.size, m * (n_iter + 1))],
                        held[rng.integers(0, held.size, m)]])
    j = rng.integers(0, d2, i.size)
    y = 2 * Y_train[i, j].astype(np.int64) - 1
    return OneBitMultiLabel(rank, batch_size=m, n_iter=n_iter, step=step,
                            threshold="estimated", validation_fraction=1.0,
                            random_state=seed, **(mapping or {})).fit(
        features[i], j, y, n_labels=d2, eval_set=eval_set)


def _features(train, test, whiten: str):
    """Standardised features; ``whiten="lw"``: times the Ledoit-Wolf ``C^{-1/2}``;
    ``"top:Q"``: the ``Q`` leading principal directions scaled to unit variance (the
    rest as they are)."""
    mu = train.mean(0)
    sd = train.std(0)
    sd[sd == 0] = 1.0
    Z_train, Z_test = (train - mu) / sd, (test - mu) / sd
    if whiten == "lw":
        C, _ = ledoit_wolf(Z_train, assume_centered=True)
        w, E = np.linalg.eigh(C)
        L = (E / np.sqrt(w)) @ E.T
        Z_train, Z_test = Z_train @ L, Z_test @ L
    elif whiten.startswith("top:"):
        w, E = np.linalg.eigh(Z_train.T @ Z_train / Z_train.shape[0])
        q = min(int(whiten[4:]), w.size)
        E, scale = E[:, -q:], 1.0 / np.sqrt(np.maximum(w[-q:], 1e-12)) - 1.0
        Z_train, Z_test = (Z + ((Z @ E) * scale) @ E.T for Z in (Z_train, Z_test))
    return Z_train, Z_test


def _scores_metrics(Y_test, S, propensities):
    keep = (Y_test.sum(0) > 0) & (Y_test.sum(0) < Y_test.shape[0])
    auc = float(np.nanmean(auc_rows(np.ascontiguousarray(Y_test[:, keep].T > 0),
                                     np.ascontiguousarray(S[:, keep].T))))
    top = np.argsort(-S, axis=1, kind="stable")[:, :5]
    out = {"auc": auc}
    out.update({k: v for k, v in top_k_metrics(Y_test, top, propensities).items()
                if k.startswith("precision")})
    return out


def package_features(whiten: str) -> dict:
    """The estimator's parameters for ``--whiten`` (``lw`` has no package analogue)."""
    if whiten == "none":
        return {"features": "standardize"}
    if whiten.startswith("top:"):
        return {"features": "whiten", "whiten_components": int(whiten[4:])}
    raise SystemExit(f"--whiten {whiten} is not a feature map of the package: use "
                     "--feature-path prewhiten")


def read_set(name, data_dir):
    """``(X_train, Y_train, X_test, Y_test)`` of the set's XC files ``NAME_train.txt`` and
    ``NAME_test.txt``: ``Y_train`` a dense int8 0/1 array, the others as read (CSR)."""
    X_train, Y_train = read_xc(os.path.join(data_dir, f"{name}_train.txt"))
    X_test, Y_test = read_xc(os.path.join(data_dir, f"{name}_test.txt"))
    return X_train, Y_train.toarray().astype(np.int8), X_test, Y_test


def uniform_bits(Y, seed, n_bits):
    """``(i, j, y)``: ``n_bits`` pairs uniform on the ``n x d2`` grid of the dense 0/1
    ``Y`` (``default_rng(seed)``: rows, then labels) and their bits ``y = 2 Y_ij - 1``."""
    n, d2 = Y.shape
    rng = np.random.default_rng(seed)
    i, j = rng.integers(0, n, n_bits), rng.integers(0, d2, n_bits)
    return i, j, 2 * Y[i, j].astype(np.int64) - 1


def run(name, data_dir, seed, n_bits, rank, n_iter, methods, whiten, step, path):
    X_train, Y_train, X_test, Y_test = read_set(name, data_dir)
    Y_test = Y_test.toarray().astype(np.int8)
    Z_train, Z_test = _features(X_train.toarray(), X_test.toarray(), whiten)
    d2 = Y_train.shape[1]
    i, j, y = uniform_bits(Y_train, seed, n_bits)
    X = Z_train[i]
    if path == "package":  # raw CSR rows, the map in the estimator
        X_own, X_own_test, mapping = X_train[i], X_test, package_features(whiten)
    else:
        X_own, X_own_test, mapping = X, Z_test, {}
    k = min(rank, d2)
    m = n_bits // (n_iter + 1)
    builders = {
        "popularity": lambda: _Popularity().fit(X, j, y, d2),
        "centroid": lambda: ColumnwiseOneBit().fit(X, j, y, n_labels=d2),
        "centroid_rank": lambda: _TruncatedCentroid(k).fit(X, j, y, d2),
        "leml": lambda: LEML(k, random_state=seed).fit(X, j, y, n_labels=d2),
        "ovr_bits": lambda: _OneVsRestBits().fit(X, j, y, d2),
        "paper": lambda: OneBitMultiLabel(k, batch_size=m, n_iter=n_iter, step="averaged",
                                          threshold="none", random_state=seed,
                                          **mapping).fit(X_own, j, y, n_labels=d2),
        "defaults": lambda: OneBitMultiLabel(k, batch_size=m, n_iter=n_iter,
                                             random_state=seed).fit(X_train[i], j, y,
                                                                    n_labels=d2),
        "pooled": lambda: OneBitMultiLabel(k, batch_size=m, n_iter=n_iter, step="pooled",
                                           random_state=seed).fit(X_train[i], j, y,
                                                                  n_labels=d2),
        "thresholded": lambda: OneBitMultiLabel(k, batch_size=m, n_iter=n_iter,
                                                step=step, threshold="estimated",
                                                random_state=seed, **mapping).fit(
            X_own, j, y, n_labels=d2),
        "thresholded_oneshot": lambda: OneBitMultiLabel(k, batch_size=n_bits, n_iter=0,
                                                        threshold="estimated",
                                                        random_state=seed, **mapping).fit(
            X_own, j, y, n_labels=d2),
        "thresholded_val": lambda: _with_validation(
            X_train if path == "package" else Z_train, Y_train, k, n_bits, n_iter, step, seed,
            mapping=mapping),
        "ovr_full": lambda: _ovr_full(Z_train, Y_train),
    }
    rows = {}
    for method in methods:
        start = time.perf_counter()
        model = builders[method]()
        seconds = time.perf_counter() - start
        own = method in ("paper", "thresholded", "thresholded_oneshot", "thresholded_val")
        test = X_test if method in ("defaults", "pooled") else X_own_test if own else Z_test
        scores = model.decision_function(test)
        rows[method] = {**_scores_metrics(Y_test, np.asarray(scores), None), "fit_s": seconds}
        if method == "defaults" and hasattr(model, "predict_proba"):
            # the same model ranked by its calibrated probabilities (each label's AUC is
            # the same: the link is increasing in the score for a label)
            rows["defaults_proba"] = {**_scores_metrics(Y_test, model.predict_proba(test),
                                                        None), "fit_s": seconds}
        if method == "thresholded":
            # its first batch (rows [0, m)) alone, with the map of all its bits' rows
            initial = OneBitMultiLabel(k, batch_size=m, n_iter=0, threshold="estimated",
                                       random_state=seed, **mapping).fit(
                X_own, j, y, n_labels=d2)
            rows["thresholded_initial"] = _scores_metrics(
                Y_test, initial.decision_function(X_own_test), None)
    return rows


def trace(name, data_dir, seed, n_bits, rank, n_iter, whiten, step):
    """The thresholded model's held-out AUC after every iteration, without and with the
    validation bits (same ``n_bits`` in all; the features transformed before the fit, as
    ``--feature-path prewhiten``): ``{"plain": [...], "val": [...],
    "val_score": [...], "val_pairs": [...], "best": i, "returned": auc}``."""
    X_train, Y_train, X_test, Y_test = read_set(name, data_dir)
    Z_train, Z_test = _features(X_train.toarray(), X_test.toarray(), whiten)
    d2 = Y_train.shape[1]
    i, j, y = uniform_bits(Y_train, seed, n_bits)
    X = Z_train[i]
    k = min(rank, d2)
    plain = OneBitMultiLabel(k, batch_size=n_bits // (n_iter + 1), n_iter=n_iter, step=step,
                             random_state=seed).fit(X, j, y, n_labels=d2,
                                                    eval_set=(Z_test, Y_test))
    val = _with_validation(Z_train, Y_train, k, n_bits, n_iter, step, seed, (Z_test, Y_test))
    return {"plain": [h["auc"] for h in plain.history_],
            "val": [h["auc"] for h in val.history_],
            "val_score": [h["validation_auc"] for h in val.history_],
            "val_pairs": [h["validation_pairs_auc"] for h in val.history_],
            "best": int(val.best_iteration_),
            "returned": val.history_[val.best_iteration_]["auc"]}


def main_trace(args):
    """``--trace``: per set, seed, step rule and number of steps, the AUC trajectories."""
    out = {}
    for name in args.sets:
        for n_iter in args.trace_n_iter:
            for step in args.trace_steps:
                runs = [trace(name, args.data_dir, s, args.bits, args.rank, n_iter,
                              args.whiten, step) for s in range(args.seeds)]
                out[f"{name}/{n_iter}/{step}"] = runs
                mean = lambda key: np.mean([r[key] for r in runs], axis=0)  # noqa: E731
                print(f"{name} n_iter {n_iter} {step} whiten {args.whiten}: initial "
                      f"{mean('plain')[0]:.3f} last {mean('plain')[-1]:.3f} min step "
                      f"{np.mean([min(r['plain'][1:]) for r in runs]):.3f} | validated "
                      f"{mean('returned'):.3f} (its last {mean('val')[-1]:.3f}, best "
                      f"iterations {[r['best'] for r in runs]})", flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)


FAST = ("popularity", "centroid", "centroid_rank", "paper", "thresholded", "thresholded_val")


def main_bits_figure(args):
    """``--figure PATH``: test AUC against the number of bits (``--bits-grid``) for the
    fast methods, mean over ``--seeds``; one panel per set."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    methods = [m for m in args.methods if m in FAST]
    fig, axes = plt.subplots(1, len(args.sets), figsize=(3.2 * len(args.sets), 3.0),
                             squeeze=False)
    out = {}
    for ax, name in zip(axes[0], args.sets):
        curves = {m: [] for m in methods}
        for bits in args.bits_grid:
            rows = [run(name, args.data_dir, s, bits, args.rank, args.n_iter, methods,
                        args.whiten, args.step, args.feature_path) for s in range(args.seeds)]
            for m in methods:
                curves[m].append(float(np.mean([r[m]["auc"] for r in rows])))
            print(name, bits, {m: round(c[-1], 3) for m, c in curves.items()}, flush=True)
        out[name] = curves
        for m in methods:
            ax.plot(args.bits_grid, curves[m], marker="o", label=m)
        ax.set_xscale("log")
        ax.set_title(name)
        ax.set_xlabel("one-bit observations")
    axes[0][0].set_ylabel("test macro AUC")
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(args.figure, dpi=110)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"bits": args.bits_grid, "auc": out}, fh, indent=1)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=os.path.join("..", "shared", "data"))
    ap.add_argument("--sets", nargs="+", default=list(SETS))
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--bits", type=int, default=110_000)
    ap.add_argument("--rank", type=int, default=10)
    ap.add_argument("--n-iter", type=int, default=10)
    ap.add_argument("--whiten", default="none",
                    help="none, lw (Ledoit-Wolf) or top:Q (the Q leading principal directions)")
    ap.add_argument("--step", default="harmonic", help="the thresholded model's step rule")
    ap.add_argument("--feature-path", default="package", choices=("package", "prewhiten"),
                    help="the one-bit models' features: raw, with the map in the estimator "
                         "(package), or transformed beforehand as the baselines' (prewhiten)")
    ap.add_argument("--json", help="write every row to this file")
    ap.add_argument("--trace", action="store_true",
                    help="the thresholded model's test AUC after every step (main_trace)")
    ap.add_argument("--trace-n-iter", nargs="+", type=int, default=[2, 5, 10])
    ap.add_argument("--trace-steps", nargs="+", default=["averaged", "harmonic"])
    ap.add_argument("--figure", help="write the figure of AUC against the number of bits "
                    "(main_bits_figure) to this PNG")
    ap.add_argument("--bits-grid", nargs="+", type=int, default=[11_000, 33_000, 110_000,
                                                                   330_000])
    args = ap.parse_args(argv)
    if args.figure:
        return main_bits_figure(args)
    if args.trace:
        return main_trace(args)
    results = {}
    for name in args.sets:
        per_seed = [run(name, args.data_dir, s, args.bits, args.rank, args.n_iter,
                        args.methods, args.whiten, args.step, args.feature_path)
                    for s in range(args.seeds)]
        results[name] = per_seed
        print(f"{name} ({args.seeds} seeds, {args.bits} bits, rank {args.rank}, features "
              f"standardised, whitening {args.whiten} ({args.feature_path} for the one-bit "
              f"models), thresholded step {args.step})")
        for method in per_seed[0]:
            mean = {key: np.mean([r[method][key] for r in per_seed])
                    for key in per_seed[0][method]}
            print(f"  {method:20s} " + "  ".join(f"{key} {value:.3f}"
                                                 for key, value in mean.items()), flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)


if __name__ == "__main__":
    main()
