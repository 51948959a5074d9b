"""Write a data file in the XC format shaped like extreme classification data.

    python benchmarks/make_xc.py --n 1000000 --d1 100000 --d2 1000000 --out big.txt
    python benchmarks/make_xc.py --n 200 --d1 500 --d2 1000 --out tiny.txt --seed 3

Label frequencies follow a power law (label ``l`` is drawn with probability
proportional to ``(l + 1)^-label_exponent``, so label 0 is the most frequent); each
instance has ``1 + Poisson(labels_per_row - 1)`` label draws (repeats dropped, so a
little fewer distinct labels). Each instance has about ``features_per_row``
non-zero features: for each of its labels, each of the label's 10 "signature"
features with probability 1/2 (so the labels can be learnt from the features), and
background features drawn with a power law over ``d1`` (as words in documents), with
values in (0, 1] to three decimals; repeats are dropped, so with the defaults and
``d1 = 10^5`` a row has 87 features and 4.9 labels on average. The output is written ``10 000`` rows at a time
(memory does not grow with ``n``), is the same for the same flags and seed, and an
existing file is never overwritten (a partial file is removed on failure).
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

BLOCK_ROWS = 10_000
SIGNATURE = 10  # signature features per label


def _power_law_cdf(size: int, exponent: float) -> np.ndarray:
    weights = np.arange(1, size + 1, dtype=np.float64) ** -exponent
    cdf = np.cumsum(weights)
    return cdf / cdf[-1]


def _draw(rng, cdf: np.ndarray, count: int) -> np.ndarray:
    return np.minimum(np.searchsorted(cdf, rng.random(count), side="right"), cdf.size - 1)


def _unique_rows(rows: np.ndarray, cols: np.ndarray, width: int, n_rows: int):
    """Distinct ``(row, col)`` pairs, sorted by row then column: ``(cols, row counts)``."""
    keys = np.sort(rows.astype(np.int64) * width + cols)
    keys = keys[np.concatenate([[True], keys[1:] != keys[:-1]])]
    return keys % width, np.bincount(keys // width, minlength=n_rows)


def _signature(labels: np.ndarray, d1: int) -> np.ndarray:
    """The ``SIGNATURE`` features of each label, shape ``(len(labels), SIGNATURE)``."""
    j = np.arange(SIGNATURE, dtype=np.int64)
    return ((labels[:, None].astype(np.int64) * SIGNATURE + j) * 2654435761) % d1


def block(rng, rows: int, args, label_cdf, feature_cdf, tables) -> bytes:
    """``rows`` lines of the file."""
    n_label = 1 + rng.poisson(max(args.labels_per_row - 1, 0), size=rows)
    label_rows = np.repeat(np.arange(rows), n_label)
    labels, label_counts = _unique_rows(label_rows, _draw(rng, label_cdf, label_rows.size),
                                        args.d2, rows)
    label_rows = np.repeat(np.arange(rows), label_counts)
    sig = _signature(labels, args.d1)
    keep = rng.random(sig.shape) < 0.5
    sig_rows = np.repeat(label_rows, SIGNATURE)[keep.ravel()]
    sig_features = sig[keep]
    n_background = np.maximum(rng.poisson(args.features_per_row, size=rows)
                              - np.bincount(sig_rows, minlength=rows), 1)
    bg_rows = np.repeat(np.arange(rows), n_background)
    features, feature_counts = _unique_rows(
        np.concatenate([sig_rows, bg_rows]),
        np.concatenate([sig_features, _draw(rng, feature_cdf, bg_rows.size)]), args.d1, rows)
    values = rng.integers(0, 1000, size=features.size)
    # pieces: per row the label set ("l1,l2 " or " "), then per feature "f:" and "v " ("v\n"
    # for the row's last feature), picked from tables so that no string is formatted twice
    label_text = [(",".join(map(str, part)) + " ").encode() for part in
                  np.split(labels, np.cumsum(label_counts)[:-1])]
    last = np.zeros(features.size, dtype=np.int64)
    last[np.cumsum(feature_counts) - 1] = 1000
    pieces = np.empty(rows + 2 * features.size, dtype=object)
    starts = np.arange(rows) + 2 * np.concatenate([[0], np.cumsum(feature_counts)[:-1]])
    is_label = np.zeros(pieces.size, dtype=bool)
    is_label[starts] = True
    pieces[is_label] = label_text
    pieces[np.flatnonzero(~is_label)[0::2]] = tables.features[features]
    pieces[np.flatnonzero(~is_label)[1::2]] = tables.values[values + last]
    return b"".join(pieces.tolist())


class Tables:
    """The text of every feature index (``b"f:"``) and value (``b"0.123 "``, and with
    ``b"\n"`` at ``1000 +``)."""

    def __init__(self, d1: int):
        self.features = np.array([f"{f}:".encode() for f in range(d1)], dtype=object)
        self.values = np.array([f"{(v + 1) / 1000:.3f}{end}".encode() for end in " \n"
                                for v in range(1000)], dtype=object)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, required=True, help="instances (rows)")
    p.add_argument("--d1", type=int, required=True, help="features")
    p.add_argument("--d2", type=int, required=True, help="labels")
    p.add_argument("--labels-per-row", type=float, default=5.0)
    p.add_argument("--features-per-row", type=float, default=100.0)
    p.add_argument("--label-exponent", type=float, default=1.0)
    p.add_argument("--feature-exponent", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, help="the new file (an existing one is refused)")
    args = p.parse_args(argv)
    for name in ("n", "d1", "d2"):
        if getattr(args, name) < 1:
            p.error(f"--{name}={getattr(args, name)} is not allowed: give an integer >= 1")
    if args.d1 < SIGNATURE:
        p.error(f"--d1={args.d1} is not allowed: give --d1 >= {SIGNATURE}")
    if args.labels_per_row < 1 or args.features_per_row < 1:
        p.error("--labels-per-row and --features-per-row must be >= 1")
    if os.path.lexists(args.out):
        p.error(f"--out={args.out!r} exists: give a new path, or delete it first")
    label_cdf = _power_law_cdf(args.d2, args.label_exponent)
    feature_cdf = _power_law_cdf(args.d1, args.feature_exponent)
    tables = Tables(args.d1)
    seeds = np.random.SeedSequence(args.seed).spawn(-(-args.n // BLOCK_ROWS))
    f = open(args.out, "xb")  # noqa: SIM115 (exclusive: from here on, the file is ours)
    try:
        with f:
            f.write(f"{args.n} {args.d1} {args.d2}\n".encode())
            for i, seed in enumerate(seeds):
                rows = min(BLOCK_ROWS, args.n - i * BLOCK_ROWS)
                f.write(block(np.random.default_rng(seed), rows, args, label_cdf, feature_cdf,
                              tables))
    except BaseException:
        os.remove(args.out)
        raise
    print(f"wrote {args.out}: {args.n} rows, d1={args.d1}, d2={args.d2}, "
          f"{os.path.getsize(args.out) / 2**20:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
