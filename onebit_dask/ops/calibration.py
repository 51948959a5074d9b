r"""The probability of a positive label from a thresholded model's score: the probit link
fitted on bits (pure NumPy and SciPy).

The thresholded model's bit is ``y = sign(x^T w*_j + b*_j + xi g)``, ``g ~ N(0, 1)``,
``||w*_j|| = 1`` (docs/ALGORITHM.md section 12), so

.. math::

    P(y = +1 \mid x) = \Phi\big((x^T w^*_j + b^*_j) / \xi\big).

The fit learns the direction ``w_j`` (a unit column) and ``b_j = Phi^{-1}(p_j)`` from the
label's share ``p_j = P(y = +1) = Phi(b*_j / sigma)``, ``sigma = sqrt(1 + xi^2)`` (for
``x ~ N(0, I)``). With ``w_j = w*_j`` the probability is therefore

.. math::

    P(y = +1 \mid x) = \Phi(\alpha\, x^T w_j + \beta\, b_j), \qquad
    \alpha = 1 / \xi, \quad \beta = \sqrt{1 + \xi^2} / \xi,

two numbers shared by all labels. A fitted ``w_j`` at angle ``theta_j`` from the truth
keeps the form, with ``alpha = cos theta_j / r_j`` and ``beta = sigma / r_j``,
``r_j = sqrt(xi^2 + sin^2 theta_j)``: the fitted link takes the model's own error in.
:func:`fit_link` estimates ``(alpha, beta)`` by maximum likelihood (probit regression
without intercept on the two columns ``u = x^T w_j`` and ``b_j``), with a wide normal
prior ``N(0, PRIOR_SCALE^2)`` on each so that the estimate exists when the bits are
separated (a noise-free fit).
"""

from __future__ import annotations

import numpy as np
from scipy.special import log_ndtr

PRIOR_SCALE = 1000.0  # standard deviation of the normal prior on alpha and beta
TOL = 1e-10  # Newton stops when a step changes the penalised log-likelihood by less
MAX_ITER = 100


def fit_link(u, b, y, prior_scale: float = PRIOR_SCALE):
    r"""Maximum a posteriori ``(alpha, beta)`` of ``P(y = +1) = Phi(alpha u + beta b)``,
    ``alpha >= 0``.

    Newton's method with step halving on the concave objective

    .. math::

        L(\theta) = \sum_i \log \Phi\big(y_i\, \theta^T z_i\big)
                    - \frac{\|\theta\|^2}{2 s^2}, \qquad z_i = (u_i, b_i),

    gradient ``sum_i y_i lambda_i z_i - theta / s^2`` and Hessian
    ``-sum_i lambda_i (t_i + lambda_i) z_i z_i^T - I / s^2`` with ``t_i = y_i theta^T z_i``
    and ``lambda_i = phi(t_i) / Phi(t_i)`` (the inverse Mills ratio). Where every ``b_i``
    is 0 (a model without thresholds) ``beta`` is 0 and only ``alpha`` is fitted.

    ``alpha = cos theta / r`` is negative only for a model worse than chance (module
    docstring); few positive bits (a rare label's share times the bits) can still put the
    unconstrained maximum there. The objective is concave, so the maximum over
    ``alpha >= 0`` is then on ``alpha = 0``: ``beta`` alone is fitted, and the
    probabilities are the thresholds' shares.

    Parameters
    ----------
    u, b : array-like of shape (n,)
        Each bit's projection ``x_i^T w_{j_i}`` and its label's threshold ``b_{j_i}``.
    y : array-like of shape (n,)
        The bits, ``+1`` / ``-1`` (entries above 0 are positive).
    prior_scale : float
        ``s``, the prior's standard deviation.

    Returns
    -------
    link : ndarray of shape (2,)
        ``(alpha, beta)``.
    covariance : ndarray of shape (2, 2)
        The inverse of the negative Hessian at the estimate (the asymptotic covariance;
        zeros in the row and column of a number not fitted).
    """
    u = np.asarray(u, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    y = np.where(np.asarray(y) > 0, 1.0, -1.0)
    if not (u.shape == b.shape == y.shape and u.ndim == 1):
        raise ValueError(f"u, b and y must be 1-D of one length: shapes {u.shape}, "
                         f"{b.shape}, {y.shape}")
    if u.size == 0:
        raise ValueError("no bits to fit the link on: give at least one")
    Z = np.stack([u, b], axis=1) * y[:, None]
    fitted = [0, 1] if np.any(b != 0) else [0]
    link, covariance = _maximise(Z, fitted, 1.0 / prior_scale ** 2)
    if link[0] < 0 and 1 in fitted:
        link, covariance = _maximise(Z, [1], 1.0 / prior_scale ** 2)
    elif link[0] < 0:
        link, covariance = np.zeros(2), np.zeros((2, 2))
    return link, covariance


def _maximise(Z, fitted, precision):
    """Newton's maximum of the penalised log-likelihood over the columns ``fitted`` of
    ``Z`` (the others held at 0); ``(link, covariance)`` as :func:`fit_link` returns."""
    Z = Z[:, fitted]

    def objective(theta):
        return float(log_ndtr(Z @ theta).sum() - 0.5 * precision * theta @ theta)

    def hessian(theta):
        t = Z @ theta
        lam = np.exp(_log_phi(t) - log_ndtr(t))
        curvature = (Z * (lam * (t + lam))[:, None]).T @ Z + precision * np.eye(len(fitted))
        return Z.T @ lam - precision * theta, curvature

    theta = np.ones(len(fitted))
    value = objective(theta)
    for _ in range(MAX_ITER):
        gradient, curvature = hessian(theta)
        delta = np.linalg.solve(curvature, gradient)
        step = 1.0
        while True:
            candidate = theta + step * delta
            new = objective(candidate)
            if new >= value or step < 1e-12:
                break
            step /= 2
        theta, change, value = candidate, new - value, new
        if abs(change) <= TOL * max(1.0, abs(value)):
            break
    link, covariance = np.zeros(2), np.zeros((2, 2))
    link[fitted] = theta
    covariance[np.ix_(fitted, fitted)] = np.linalg.inv(hessian(theta)[1])
    return link, covariance


def _log_phi(t):
    """The log of the standard normal density."""
    return -0.5 * t * t - 0.5 * np.log(2 * np.pi)
