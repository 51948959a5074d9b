"""What the BLAS kernel may and may not change.

- Singular and eigenvectors that enter the model take a canonical sign
  (``kernels.canonical_signs``): which sign LAPACK returns depends on the kernel and on
  the shape of the call, the model's factors do not.
- Another kernel rounds sums in another order; where that changes one bit's sign, the
  fit takes another path. Its test metrics then differ as another seed's would, no more
  (the test below flips the sign of the one score nearest zero, as such a rounding does).
- Provenance records each process's BLAS, and a fit whose workers run another kernel than
  the client says so in one warning.
"""

import warnings

import numpy as np
import scipy.linalg
import zarr

from onebit_dask import OneBitMultiLabel
from onebit_dask.ops import kernels
from onebit_dask.utils import provenance
from onebit_dask.fit.algorithm import initialise_dense

from tests.support.helpers import run_cli, small_quickstart


def test_canonical_signs_make_two_lapack_routes_agree():
    """The left singular vectors of ``M`` from ``svd(M)`` and from ``svd(M.T)`` (another
    LAPACK call shape) and from ``eigh(M M^T)`` agree once signed; unsigned they do not
    (the check has power: it fails without the canonical sign)."""
    rng = np.random.default_rng(0)
    M = rng.standard_normal((40, 12))
    k = 5
    routes = [scipy.linalg.svd(M, full_matrices=False)[0][:, :k],
              scipy.linalg.svd(M.T, full_matrices=False)[2][:k].T,
              scipy.linalg.eigh(M @ M.T)[1][:, ::-1][:, :k]]
    assert any(not np.allclose(routes[0], U, atol=1e-8) for U in routes[1:])  # power
    signed = [U * kernels.canonical_signs(U) for U in routes]
    for U in signed[1:]:
        np.testing.assert_allclose(U, signed[0], atol=1e-10)
    top = np.abs(signed[0]).argmax(axis=0)
    assert np.all(signed[0][top, np.arange(k)] > 0)
    assert np.array_equal(kernels.canonical_signs(np.zeros((3, 2))), [1.0, 1.0])


def test_initial_factors_take_the_canonical_sign():
    rng = np.random.default_rng(1)
    d1, d2, k = 9, 14, 3
    S = rng.standard_normal((d2, d1))
    Q0, _ = initialise_dense(S, 100, d1, d2, k)
    for Q in (Q0, initialise_dense(-S, 100, d1, d2, k)[0]):
        U = Q[:d1, :k]
        assert np.array_equal(kernels.canonical_signs(U), np.ones(k))
    # the sign of S moves into V, never into the feature factor
    np.testing.assert_allclose(initialise_dense(-S, 100, d1, d2, k)[0][:d1], Q0[:d1],
                               atol=1e-12)


def _planted(n, seed, d1=20, d2=10, rank=2):
    rng = np.random.default_rng(seed)
    truth = np.random.default_rng(99).standard_normal((d1, rank)) @ \
        np.random.default_rng(98).standard_normal((rank, d2))
    X = rng.standard_normal((n, d1))
    Y = (X @ truth + 0.5 * rng.standard_normal((n, d2)) > 0.3).astype(np.int8)
    return X, Y


def _test_metrics(model, X, Y):
    scores = model.decision_function(X)
    return model.score(X, Y), float(np.mean((scores > 0) != (Y > 0)))


def test_a_rounding_that_flips_one_bit_moves_metrics_as_a_seed_does(monkeypatch):
    """A kernel whose rounding flips the sign of one bit's score (the score nearest zero,
    at the first step) sends the fit on another path: its factors differ, and its test
    AUC and Hamming loss differ from the unflipped fit's by at most four standard
    deviations of those metrics over seeds (a level of about 0.5 % for a difference of
    two independent paths, normal approximation). A kernel that flips every score's sign
    (a wrong kernel, not a rounding) is rejected by the same bound."""
    X, Y = _planted(3000, 0)
    Xt, Yt = _planted(3000, 1)
    params = dict(batch_size=6000, n_iter=6, engine="local", step="harmonic")

    def fit(seed=0):
        return OneBitMultiLabel(2, random_state=seed, **params).fit(X, Y)

    per_seed = np.array([_test_metrics(fit(seed), Xt, Yt) for seed in range(1, 9)])
    bound = 4 * per_seed.std(axis=0, ddof=1)
    reference = fit()
    sign = kernels.sign

    def flipping(how):
        calls = []

        def flipped(s):
            out = sign(s)
            if how == "every" or not calls:
                if how == "one":
                    i = int(np.argmin(np.abs(s)))
                    out[i] = -out[i] if out[i] != 0 else 1.0
                else:
                    out = -out
            calls.append(1)
            return out
        return flipped

    monkeypatch.setattr(kernels, "sign", flipping("one"))
    diverged = fit()
    assert np.max(np.abs(diverged.coef_ - reference.coef_)) > 1e-6  # another path
    gap = np.abs(np.subtract(_test_metrics(diverged, Xt, Yt), _test_metrics(reference, Xt, Yt)))
    assert np.all(gap <= bound), (gap, bound)

    monkeypatch.setattr(kernels, "sign", flipping("every"))
    wrong = np.abs(np.subtract(_test_metrics(fit(), Xt, Yt), _test_metrics(reference, Xt, Yt)))
    assert np.any(wrong > bound), (wrong, bound)


def test_blas_summary_and_warning():
    mine = provenance.blas()
    assert mine != "none found" and "(" in mine
    same = {"tcp://a": mine, "tcp://b": mine}
    assert provenance.blas_summary(mine, same) == f"client: {mine}; workers: the same (2)"
    other = {"tcp://a": mine, "tcp://b": "openblas 0.3.31 Zen (libscipy_openblas)"}
    assert "Zen" in provenance.blas_summary(mine, other)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        provenance.warn_if_blas_differs(mine, same)
        assert not seen
        provenance.warn_if_blas_differs(mine, other)
    assert len(seen) == 1 and "tcp://b" in str(seen[0].message)


def test_stores_record_the_processes_blas(client2, tmp_path):
    X, Y = _planted(400, 0)
    mine = provenance.blas()
    with warnings.catch_warnings(), client2.as_current():
        warnings.simplefilter("error", UserWarning)  # the workers run this process's BLAS
        model = OneBitMultiLabel(2, batch_size=2000, n_iter=2, random_state=0,
                                 engine="dask").fit(X, Y)
        model.save(tmp_path / "m.zarr")  # the blocks written where they live
    attrs = dict(zarr.open_group(str(tmp_path / "m.zarr"), mode="r").attrs)
    assert attrs["blas"] == f"client: {mine}; workers: the same (2)"
    local = OneBitMultiLabel(2, batch_size=2000, n_iter=2, random_state=0,
                             engine="local").fit(X, Y)
    local.save(tmp_path / "l.zarr")
    attrs = dict(zarr.open_group(str(tmp_path / "l.zarr"), mode="r").attrs)
    assert attrs["blas"] == f"client: {mine}; workers: none (in-process)"


def test_cube_records_the_blas(tmp_path):
    spec = small_quickstart(tmp_path)
    out = tmp_path / "q.zarr"
    proc = run_cli("sweep", spec, "--out", out, "--workers", "0", "--quiet")
    assert proc.returncode == 0, proc.stderr
    attrs = dict(zarr.open_group(str(out), mode="r").attrs)
    assert attrs["blas"] == f"client: {provenance.blas()}; workers: none (in-process)"
