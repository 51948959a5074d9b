"""The extreme classification libraries a user would pick instead, on generated XC files.

    python benchmarks/bench_xc_peers.py --python PEERS_VENV/bin/python --n 20000 --d2 10000
    python benchmarks/bench_xc_peers.py --python PEERS_VENV/bin/python --smoke

Writes a training and a test file with ``benchmarks/make_xc.py`` (seeds 0 and 1: the
same label and feature law), then trains and predicts the top 5 labels with each of
omikuji (Parabel/Bonsai trees), napkinXC (PLT) and PECOS (XR-Linear), each in a fresh
process of ``--python`` (an interpreter with ``omikuji napkinxc libpecos`` installed:
a separate virtualenv, ``python -m venv PEERS_VENV && PEERS_VENV/bin/pip install
"numpy<2" "scipy<1.12" scikit-learn omikuji napkinxc && PEERS_VENV/bin/pip install
--no-deps libpecos``; PECOS 1.2.8 calls ``scipy.sparse.sputils.get_index_dtype``, which
later SciPy releases no longer have, and pins NumPy below 2), with
one thread, given the full label sets, and (``--bits M ...``) given the one-bit
observations a uniform draw of ``M`` (instance, label) pairs would yield: the
positive bits, each as an instance with that single label (the negative bits are
dropped: these libraries take positive labels only). With ``p`` positives among
``d2`` labels per instance, one uniform bit is positive with probability ``p / d2``.
``--found B ...`` fits onebit-dask with learner-chosen queries (``queries="model"``,
its defaults, ``B`` bits in 10 batches, ``--onebit-rank``) on the training label matrix
and gives the libraries the positives those queries found: each training instance with
the labels found positive for it (instances with none left out), issue 38's item 5
(b); the onebit-dask fit's own test metrics are a row of the table.
onebit-dask's own row (in this interpreter, in-process, one BLAS thread) fits the
training file's label matrix with ``--onebit-step``, ``--onebit-iter + 1`` batches of
``--onebit-batch-size`` uniform (instance, label) pairs, i.e. that many one-bit
observations, and predicts with ``predict_top_k``. Reports per library and input the
training and prediction time, the peak RSS of its process (its own ``VmHWM``, Linux:
``ru_maxrss`` of a child starts at its parent's RSS), and P@1/3/5, nDCG@5 and PSP@5
computed here by :mod:`onebit_dask.metrics.ranking` (propensities from the full training
labels; a library that returns fewer than 5 labels for a row is scored as missing
there, and the "missing" column says how often). The last line is JSON.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import numpy as np

from onebit_dask.io.xc import read_xc
from onebit_dask.metrics.ranking import propensities, top_k_metrics

HERE = pathlib.Path(__file__).parent
K = 5

LOAD = """
import json, sys, time
import numpy as np
import scipy.sparse as sp
from sklearn.datasets import load_svmlight_file
train, test, out, workdir = sys.argv[1:5]
def peak_mib():  # this process's own peak RSS (ru_maxrss starts at the parent's)
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmHWM")) / 1024
def load(path):
    with open(path) as f:
        n, d1, d2 = map(int, f.readline().split())
    X, labels = load_svmlight_file(path, multilabel=True, zero_based=True, offset=1,
                                   n_features=d1, dtype=np.float32)
    return X, [[int(l) for l in row] for row in labels], d2
def csr(labels, d2):
    indptr = np.cumsum([0] + [len(r) for r in labels])
    return sp.csr_matrix((np.ones(indptr[-1], np.float32),
                          np.array([l for r in labels for l in r], dtype=np.int64), indptr),
                         shape=(len(labels), d2))
"""

PEERS = {
    "omikuji (Parabel-like trees)": LOAD + """
import omikuji
start = time.perf_counter()
hp = omikuji.Model.default_hyper_param()
model = omikuji.Model.train_on_data(train, hp, n_threads=1)
train_s = time.perf_counter() - start
X, _, _ = load(test)
start = time.perf_counter()
top = np.full((X.shape[0], %(k)d), -1, dtype=np.int64)
for i in range(X.shape[0]):
    row = X[i]
    pred = model.predict(list(zip(row.indices.tolist(), row.data.tolist())), top_k=%(k)d)
    top[i, :len(pred)] = [label for label, _ in pred]
predict_s = time.perf_counter() - start
np.save(out, top)
print(json.dumps({"train_s": train_s, "predict_s": predict_s, "peak_mib": peak_mib()}))
""",
    "napkinXC (PLT)": LOAD + """
from napkinxc.models import PLT
X, labels, d2 = load(train)
start = time.perf_counter()
model = PLT(workdir + "/plt", threads=1, seed=0)
model.fit(X, labels)
train_s = time.perf_counter() - start
X, _, _ = load(test)
start = time.perf_counter()
pred = model.predict(X, top_k=%(k)d)
top = np.full((X.shape[0], %(k)d), -1, dtype=np.int64)
for i, row in enumerate(pred):
    top[i, :len(row)] = row
predict_s = time.perf_counter() - start
np.save(out, top)
print(json.dumps({"train_s": train_s, "predict_s": predict_s, "peak_mib": peak_mib()}))
""",
    "PECOS (XR-Linear)": LOAD + """
from pecos.xmc import Indexer, LabelEmbeddingFactory
from pecos.xmc.xlinear.model import XLinearModel
X, labels, d2 = load(train)
start = time.perf_counter()
Y = csr(labels, d2)
chain = Indexer.gen(LabelEmbeddingFactory.create(Y, X, method="pifa"), threads=1)
model = XLinearModel.train(X, Y, C=chain, threads=1)
train_s = time.perf_counter() - start
X, _, _ = load(test)
start = time.perf_counter()
scores = model.predict(X, only_topk=%(k)d, threads=1).tocsr()
top = np.full((X.shape[0], %(k)d), -1, dtype=np.int64)
for i in range(X.shape[0]):
    lo, hi = scores.indptr[i], scores.indptr[i + 1]
    order = np.argsort(-scores.data[lo:hi], kind="stable")[:%(k)d]
    top[i, :order.size] = scores.indices[lo:hi][order]
predict_s = time.perf_counter() - start
np.save(out, top)
print(json.dumps({"train_s": train_s, "predict_s": predict_s, "peak_mib": peak_mib()}))
""",
}


ONEBIT = """
import json, sys, time
import numpy as np
from onebit_dask import OneBitMultiLabel
from onebit_dask.io.xc import read_xc
train, test, out, workdir, rank, batch_size, n_iter, step = sys.argv[1:9]
def peak_mib():  # this process's own peak RSS (ru_maxrss starts at the parent's)
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmHWM")) / 1024
X, Y = read_xc(train)
start = time.perf_counter()
est = OneBitMultiLabel(int(rank), batch_size=int(batch_size), n_iter=int(n_iter),
                       step=step, engine="local", random_state=0, progress=False)
est.fit(X, Y)
train_s = time.perf_counter() - start
X, _ = read_xc(test, n_features=est.n_features_in_, n_labels=est.n_labels_)
start = time.perf_counter()
top, _ = est.predict_top_k(X, k=%(k)d)
predict_s = time.perf_counter() - start
np.save(out, top)
print(json.dumps({"train_s": train_s, "predict_s": predict_s, "peak_mib": peak_mib()}))
"""


def run(python: str, code: str, *args: str):
    """``(stdout, ru_maxrss in MiB)`` of a fresh process of ``python`` running ``code``
    (``ru_maxrss`` starts at this process's RSS: a failed child's only figure)."""
    with tempfile.TemporaryFile("w+") as err:  # progress bars; shown if the process fails
        proc = subprocess.Popen([python, "-c", code, *args], stdout=subprocess.PIPE,
                                stderr=err, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            err.seek(0)
            sys.stderr.write(err.read()[-3000:])
            out = None
    return out, usage.ru_maxrss / 1024


def positive_bits(X, Y, bits: int, seed: int, path: str) -> int:
    """Write the positive bits of ``bits`` uniform (instance, label) draws as an XC file
    of single-label instances; return their number."""
    from sklearn.datasets import dump_svmlight_file

    rng = np.random.default_rng(seed)
    i = rng.integers(0, Y.shape[0], size=bits)
    j = rng.integers(0, Y.shape[1], size=bits)
    hit = np.asarray(Y[i, j]).ravel() > 0
    with open(path, "wb") as f:
        f.write(f"{int(hit.sum())} {X.shape[1]} {Y.shape[1]}\n".encode())
        if hit.any():
            dump_svmlight_file(X[i[hit]], [(int(label),) for label in j[hit]], f,
                               zero_based=True, multilabel=True)
    return int(hit.sum())


def found_positives(X, Y, bits: int, rank: int, path: str):
    """Fit onebit-dask with learner-chosen queries on the label matrix ``(X, Y)`` (``bits``
    bits in 10 batches) and write the positives they found as an XC file: each instance
    with its labels found positive (instances with none left out). Returns the fitted
    estimator, its training seconds and the number of positives found."""
    import scipy.sparse as sp
    from sklearn.datasets import dump_svmlight_file

    from onebit_dask import OneBitMultiLabel

    start = time.perf_counter()
    est = OneBitMultiLabel(rank, batch_size=bits // 10, n_iter=9, queries="model",
                           engine="local", random_state=0, progress=False).fit(X, Y)
    seconds = time.perf_counter() - start
    rows, labels = est.queries_asked_
    hit = np.asarray(Y[rows, labels]).ravel() > 0
    found = sp.csr_matrix((np.ones(int(hit.sum())), (rows[hit], labels[hit])), shape=Y.shape)
    found.sum_duplicates()
    keep = np.flatnonzero(np.diff(found.indptr) > 0)
    with open(path, "wb") as f:
        f.write(f"{keep.size} {X.shape[1]} {Y.shape[1]}\n".encode())
        dump_svmlight_file(X[keep], found[keep], f, zero_based=True, multilabel=True)
    return est, seconds, int(found.nnz)


def _fill(top: np.ndarray, Y_test) -> np.ndarray:
    """Rows with fewer than ``K`` predictions (``-1``) completed by labels that are not
    among the row's positives, so every row lists ``K`` distinct labels and a missing
    prediction counts as a miss."""
    for i in np.flatnonzero((top < 0).any(axis=1)):
        taken = set(top[i][top[i] >= 0].tolist()) | set(Y_test[i].indices.tolist())
        spare = (label for label in range(Y_test.shape[1]) if label not in taken)
        top[i] = [t if t >= 0 else next(spare) for t in top[i]]
    return top


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--python", default=sys.executable,
                   help="an interpreter with omikuji, napkinxc and libpecos installed")
    p.add_argument("--n", type=int, default=20_000, help="training rows")
    p.add_argument("--n-test", type=int, default=5_000)
    p.add_argument("--d1", type=int, default=20_000)
    p.add_argument("--d2", type=int, default=10_000)
    p.add_argument("--bits", type=int, nargs="*", default=[],
                   help="also train on the positive bits of this many uniform draws")
    p.add_argument("--found", type=int, nargs="*", default=[],
                   help="bit budgets of onebit-dask's learner-chosen queries whose positives "
                        "found the libraries are given")
    p.add_argument("--onebit-rank", type=int, default=50,
                   help="rank 3 cannot hold 10^4 labels: see EXPERIMENTS.md, 'Extreme label "
                        "counts: where the gap is'")
    p.add_argument("--onebit-step", default="moment",
                   help="onebit-dask's step rule (the residual 'averaged' step gave P@1 0.58 "
                        "where 'moment' gives 0.71 at 2e6 bits)")
    p.add_argument("--onebit-batch-size", type=int, default=1_000_000,
                   help="uniform (instance, label) pairs a batch of onebit-dask's fit")
    p.add_argument("--onebit-iter", type=int, default=20, help="its steps after the first batch")
    p.add_argument("--no-peers", action="store_true",
                   help="onebit-dask's row only (where the libraries are not installed)")
    p.add_argument("--smoke", action="store_true")
    args = p.parse_args(argv)
    if args.smoke:
        args.n, args.n_test, args.d1, args.d2, args.bits = 2000, 500, 2000, 500, [100_000]
        args.onebit_batch_size, args.onebit_iter = 100_000, 3
    results = []
    with tempfile.TemporaryDirectory(prefix="bench_xc_peers_") as tmp:
        paths = {}
        for name, n, seed in (("train", args.n, 0), ("test", args.n_test, 1)):
            paths[name] = os.path.join(tmp, f"{name}.txt")
            subprocess.run([sys.executable, str(HERE / "make_xc.py"), "--n", str(n), "--d1",
                            str(args.d1), "--d2", str(args.d2), "--seed", str(seed), "--out",
                            paths[name]], check=True, stdout=subprocess.DEVNULL)
        X_train, Y_train = read_xc(paths["train"])
        _, Y_test = read_xc(paths["test"])
        p_l = propensities(Y_train)
        inputs = [("full label sets", paths["train"])]
        for bits in args.bits:
            path = os.path.join(tmp, f"bits_{bits}.txt")
            positives = positive_bits(X_train, Y_train, bits, 0, path)
            if positives:
                inputs.append((f"{bits} bits ({positives} positive)", path))
            else:
                print(f"# {bits} bits: no positive bit, nothing to train on")
        X_test, _ = read_xc(paths["test"], n_features=X_train.shape[1],
                            n_labels=Y_train.shape[1])
        for bits in args.found:
            path = os.path.join(tmp, f"found_{bits}.txt")
            est, seconds, positives = found_positives(X_train, Y_train, bits,
                                                      args.onebit_rank, path)
            given = f"{bits} bits chosen by the model ({positives} positives found)"
            inputs.append((given, path))
            start = time.perf_counter()
            top, _ = est.predict_top_k(X_test, K)
            metrics = top_k_metrics(Y_test, top, p_l, ks=(1, 3, 5))
            results.append({"library": "onebit-dask (queries='model', in-process)",
                            "given": given, "missing": 0.0, "train_s": round(seconds, 2),
                            "predict_s": round(time.perf_counter() - start, 2),
                            "peak_mib": None,
                            **{key: round(metrics[key], 4) for key in (
                                "precision_at_1", "precision_at_3", "precision_at_5",
                                "ndcg_at_5", "psp_at_5")}})
        bits = args.onebit_batch_size * (args.onebit_iter + 1)
        runs = [] if args.no_peers else [
            (given, train, name, args.python, code, ())
            for (given, train), (name, code) in itertools.product(inputs, PEERS.items())]
        runs.insert(0, (f"label matrix: {bits} uniform bits", paths["train"],
                        f"onebit-dask (step={args.onebit_step!r}, in-process)",
                        sys.executable, ONEBIT, (args.onebit_rank, args.onebit_batch_size,
                                                 args.onebit_iter, args.onebit_step)))
        for given, train, name, python, code, extra in runs:
            out = os.path.join(tmp, "top.npy")
            work = tempfile.mkdtemp(dir=tmp)
            stdout, peak = run(python, code % {"k": K}, train, paths["test"], out, work,
                               *map(str, extra))
            if stdout is None:
                results.append({"library": name, "given": given, "failed": True,
                                "peak_mib": round(peak, 1)})
                continue
            times = json.loads(stdout.strip().splitlines()[-1])
            top = np.load(out)
            missing = float((top < 0).mean())
            metrics = top_k_metrics(Y_test, _fill(top, Y_test), p_l, ks=(1, 3, 5))
            results.append({"library": name, "given": given, "missing": round(missing, 3),
                            "train_s": round(times["train_s"], 2),
                            "predict_s": round(times["predict_s"], 2),
                            "peak_mib": round(times["peak_mib"], 1),
                            **{key: round(metrics[key], 4) for key in (
                                "precision_at_1", "precision_at_3", "precision_at_5",
                                "ndcg_at_5", "psp_at_5")}})
    print(f"# n={args.n} train / {args.n_test} test rows, d1={args.d1}, d2={args.d2}, "
          f"{Y_train.nnz / Y_train.shape[0]:.2f} labels per row; one thread each")
    print("| library | given | train s | predict s | peak MiB | P@1 | P@3 | P@5 | nDCG@5 | "
          "PSP@5 | missing |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        if r.get("failed"):
            print(f"| {r['library']} | {r['given']} | failed | | {r['peak_mib']} | | | | | | |")
            continue
        print(f"| {r['library']} | {r['given']} | {r['train_s']} | {r['predict_s']} | "
              f"{r['peak_mib']} | "
              f"{r['precision_at_1']} | {r['precision_at_3']} | {r['precision_at_5']} | "
              f"{r['ndcg_at_5']} | {r['psp_at_5']} | {r['missing']} |")
    print(json.dumps({"n": args.n, "n_test": args.n_test, "d1": args.d1, "d2": args.d2,
                      "results": results}))
    return 0 if not any(r.get("failed") for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
