r"""The plane's pieces of the conditional sampler with thresholds (docs/ALGORITHM.md,
section 7c; pure NumPy and SciPy, no Dask): where, in the plane of a label's bit and
score, a row is active, the pieces' probabilities (bivariate normal orthants by Owen's
``T``) and the rows drawn on them (:func:`rows_in_pieces`).

In the plane, z ~ N(0, I_2); the bit before its flip is sign(c.z + beta), the score's
sign sign(e.z + b). The four pieces [A, B, C, D] = [{bit +, score -}, {bit -, score +},
{both +}, {both -}]: A, B are where they disagree, C, D where they agree; every active
row has r = -2 sign(score): [+2, -2, -2, +2]. Each piece is {n1.z >= t1} and
{n2.z >= t2} with unit normals; a half-plane with a zero normal is the whole plane or
nothing (t = -T_MAX or +T_MAX: Phi(-40) = 0 in float64).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.special import log_ndtr, ndtr, ndtri_exp, owens_t

from ...ops.kernels import sign

TWO_PI = 2.0 * np.pi

T_MAX = 40.0
PARALLEL = 1e-9  # |n1 x n2| below this: parallel boundaries (exactly, to rounding)
PIECE_SIGNS = np.array([(1, -1), (-1, 1), (1, 1), (-1, -1)])  # (bit, score) of A, B, C, D
PIECE_RESIDUAL = np.array([2.0, -2.0, -2.0, 2.0])


class PlanePieces(NamedTuple):
    """Per label and piece (shape ``(L, 4)``, ``(L, 4, 2)`` for vectors): the piece is
    ``{s >= t1, rho s + tau w >= t2}`` in the coordinates ``z = s n1 + w perp``."""

    n1: np.ndarray
    perp: np.ndarray
    t1: np.ndarray
    t2: np.ndarray
    rho: np.ndarray
    tau: np.ndarray
    mass: np.ndarray


def _rot90(n: np.ndarray) -> np.ndarray:
    return np.stack([-n[..., 1], n[..., 0]], axis=-1)


def _half_plane(a: np.ndarray, h: np.ndarray, sigma: int, norm=None):
    """``{sigma (a.z + h) >= 0}`` (``sigma = -1``: ``a.z + h < 0``) as ``{n.z >= t}``:
    ``(n, t, proper)``; where ``a = 0`` it is the plane (``t = -T_MAX``) or nothing
    (``t = T_MAX``) by the sign of ``h`` (``sign(0) = +1``), and ``n`` is to be chosen.
    ``norm``: the rows' norms of ``a`` if already computed (the four pieces share them)."""
    if norm is None:
        norm = np.linalg.norm(a, axis=1)
    proper = norm > 0
    safe = np.where(proper, norm, 1.0)
    n = sigma * a / safe[:, None]
    whole = (h >= 0) if sigma > 0 else (h < 0)
    t = np.where(proper, -sigma * h / safe, np.where(whole, -T_MAX, T_MAX))
    return n, np.clip(t, -T_MAX, T_MAX), proper


def plane_pieces(c2d: np.ndarray, beta: np.ndarray, e2d: np.ndarray,
                 b: np.ndarray) -> PlanePieces:
    """The four pieces of every label and their probabilities (``mass``, ``(L, 4)``)."""
    fields = []
    c_norm, e_norm = np.linalg.norm(c2d, axis=1), np.linalg.norm(e2d, axis=1)
    for s_bit, s_score in PIECE_SIGNS:
        n1, t1, ok1 = _half_plane(c2d, beta, s_bit, c_norm)
        n2, t2, ok2 = _half_plane(e2d, b, s_score, e_norm)
        axis = np.zeros_like(n1)
        axis[:, 0] = 1.0
        n1 = np.where(ok1[:, None], n1, np.where(ok2[:, None], _rot90(n2), axis))
        n2 = np.where(ok2[:, None], n2, _rot90(n1))
        rho = np.clip(np.sum(n1 * n2, axis=1), -1.0, 1.0)
        cross = n1[:, 0] * n2[:, 1] - n1[:, 1] * n2[:, 0]
        tau = np.abs(cross)
        parallel = tau < PARALLEL
        tau = np.where(parallel, 0.0, tau)
        rho = np.where(parallel, sign(rho), rho)
        perp = sign(cross)[:, None] * _rot90(n1)
        fields.append((n1, perp, t1, t2, rho, tau))
    n1, perp, t1, t2, rho, tau = (np.stack(f, axis=1) for f in zip(*fields))
    mass = np.clip(upper_orthant(t1, t2, rho, tau), 0.0, 1.0)
    return PlanePieces(n1, perp, t1, t2, rho, tau, mass)


def upper_orthant(h, k, rho, tau):
    r"""``P(X1 >= h, X2 >= k)`` for standard normals with correlation ``rho``,
    ``tau = sqrt(1 - rho^2)`` (``tau = 0``: ``rho = +-1``, ``X2 = rho X1``).

    For ``tau > 0`` it is ``Phi_2(-h, -k; rho)`` by Owen's formula
    ``Phi_2(h, k; rho) = (Phi(h) + Phi(k)) / 2 - T(h, a_h) - T(k, a_k) - beta`` with
    ``a_h = (k - rho h) / (h tau)``, ``a_k = (h - rho k) / (k tau)`` and ``beta = 1/2``
    if ``h k < 0`` or (``h k = 0`` and ``h + k < 0``), else 0; at ``h = 0`` its limit
    from ``h > 0`` (``a_h = sign(k) inf``, or ``(1 - rho) / tau`` if also ``k = 0``).
    """
    h, k = np.broadcast_arrays(-np.asarray(h, dtype=np.float64), -np.asarray(k, dtype=np.float64))
    rho, tau = np.broadcast_to(rho, h.shape), np.broadcast_to(tau, h.shape)
    proper = tau > 0
    safe = np.where(proper, tau, 1.0)
    edge = (1.0 - rho) / safe

    def slope(x, y):
        with np.errstate(divide="ignore", invalid="ignore"):
            a = (y - rho * x) / (x * safe)
        return np.where(x != 0, a, np.where(y != 0, np.copysign(np.inf, y), edge))

    hk = np.sign(h) * np.sign(k)
    half = np.where((hk < 0) | ((hk == 0) & (h + k < 0)), 0.5, 0.0)
    owen = (0.5 * ndtr(h) + 0.5 * ndtr(k) - owens_t(h, slope(h, k)) - owens_t(k, slope(k, h))
            - half)
    if proper.all():
        return owen
    # tau = 0, back in the upper-orthant arguments: rho = 1: X1 >= max(h, k);
    # rho = -1: h <= X1 <= -k (each difference taken on the side of small tails)
    H, K = -h, -k
    same = ndtr(-np.maximum(H, K))
    opposite = np.maximum(np.where(H > 0, ndtr(-H) - ndtr(K), ndtr(-K) - ndtr(H)), 0.0)
    return np.where(proper, owen, np.where(rho > 0, same, opposite))


def _marginal_density(x, t2, rho, tau):
    """Density of ``s`` on its piece, unnormalised: ``phi(s) P(rho s + tau w >= t2)``."""
    proper = tau > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        arg = np.where(proper, (rho * x - t2) / np.where(proper, tau, 1.0),
                       np.where(rho * x - t2 >= 0, np.inf, -np.inf))
    return np.exp(-0.5 * x * x) / np.sqrt(TWO_PI) * ndtr(arg)


NEWTON_STEP = 1e-8  # a Newton step this small (relative): the next error is ~1e-16
BRACKET_TOL = 1e-13
NEWTON_MAX_ITER = 200


def inverse_marginal(u, t1, t2, rho, tau, mass):
    """Per row, ``s >= t1`` with ``G(s) = u G(t1)``, ``G(x) = P(S >= x, rho S + tau W >= t2)``
    (``G(t1) = mass > 0``, ``u`` in ``(0, 1]``): Newton's method on ``log G`` (concave:
    ``G`` is the survival function of a log-concave density), started where the first
    constraint alone would put ``s``, kept in a shrinking bracket ``[lo, hi]`` (``hi``:
    where ``P(S >= hi)`` is the target) and
    replaced by bisection where it leaves it; it stops after a Newton step below
    ``NEWTON_STEP`` (quadratic convergence) or a bracket below ``BRACKET_TOL``."""
    with np.errstate(divide="ignore"):  # a piece of mass 0 is never picked by a real draw
        log_target = np.log(u * mass)
    x = np.clip(-ndtri_exp(np.log(u) + log_ndtr(-t1)), t1, T_MAX)
    g = upper_orthant(x, t2, rho, tau)
    # G(x) <= P(S >= x): the root is left of where that equals the target
    lo, hi = t1.copy(), np.clip(-ndtri_exp(log_target), t1, T_MAX)
    todo = np.arange(x.size)
    for _ in range(NEWTON_MAX_ITER):
        if not todo.size:
            break
        xi, gi, a, z = x[todo], g[todo], lo[todo], hi[todo]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            f = np.where(gi > 0, np.log(np.where(gi > 0, gi, 1.0)) - log_target[todo], -np.inf)
            right = f >= 0  # G(x) >= target: the root is at or right of x
            a, z = np.where(right, xi, a), np.where(right, z, xi)
            step = xi + f * gi / _marginal_density(xi, t2[todo], rho[todo], tau[todo])
        newton = np.isfinite(step) & (step > a) & (step < z)
        new = np.where(newton, step, 0.5 * (a + z))
        lo[todo], hi[todo], x[todo] = a, z, new
        done = np.where(newton, np.abs(new - xi) <= NEWTON_STEP * (1.0 + np.abs(xi)),
                        z - a <= BRACKET_TOL * (1.0 + np.abs(xi)))
        todo = todo[~done]
        g[todo] = upper_orthant(x[todo], t2[todo], rho[todo], tau[todo])
    return x


def rows_in_pieces(rng, pieces: PlanePieces, j: np.ndarray, agree: np.ndarray):
    """``(z, piece)`` of active rows of labels ``j``: ``z_i`` (``(n, 2)``) in the plane from
    ``N(0, I_2)`` restricted to where the bit and the score disagree (``agree`` false) or
    agree (a flipped row), and its piece (an index into :data:`PIECE_RESIDUAL`). Three
    uniforms per row, in turn: the piece (with probability
    proportional to its mass), ``s`` by inverse transform (:func:`inverse_marginal`), and
    ``w`` given ``s`` from ``N(0, 1)`` truncated to ``rho s + tau w >= t2`` (in log space,
    exact in the tails)."""
    n = j.size
    base = np.where(agree, 2, 0)
    m0, m1 = pieces.mass[j, base], pieces.mass[j, base + 1]
    pick = base + (rng.random(n) * (m0 + m1) >= m0)
    at = lambda a: a[j, pick]  # noqa: E731
    t1, t2, rho, tau, mass = map(at, (pieces.t1, pieces.t2, pieces.rho, pieces.tau,
                                      pieces.mass))
    s = inverse_marginal(1.0 - rng.random(n), t1, t2, rho, tau, mass)
    with np.errstate(divide="ignore", invalid="ignore"):
        low = np.where(tau > 0, (t2 - rho * s) / np.where(tau > 0, tau, 1.0), -np.inf)
    w = -ndtri_exp(np.log1p(-rng.random(n)) + log_ndtr(-low))
    return s[:, None] * at(pieces.n1) + w[:, None] * at(pieces.perp), pick
