"""The samplers' shared draws (:mod:`onebit_dask.data.synthetic.draws`)."""

import numpy as np

from onebit_dask.data.synthetic import draws


def test_span_basis_contains_its_factors():
    rng = np.random.default_rng(0)
    F1, F2 = rng.standard_normal((9, 2)), rng.standard_normal((9, 4))
    P = draws.span_basis(F1, F2)
    assert P.shape == (9, 6)
    np.testing.assert_allclose(P.T @ P, np.eye(6), atol=1e-12)
    for F in (F1, F2):
        np.testing.assert_allclose(P @ (P.T @ F), F, atol=1e-12)
