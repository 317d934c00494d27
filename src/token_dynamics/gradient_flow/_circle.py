"""Softmax attention on the circle: metastable clusters and the energy staircase (private)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from scipy.integrate import solve_ivp

from .._typing import FloatArray, SeedLike
from .._validation import as_rng, check_int, check_positive, time_text
from ..attention import softmax_weights
from ..diagnostics import interaction_energy

__all__ = ["CircleMetastability", "circle_metastability"]


@dataclass(frozen=True)
class CircleMetastability:
    """Softmax attention on the circle from uniform tokens: slow merging of clusters.

    Attributes
    ----------
    times : ndarray, shape (T,)
    states : ndarray, shape (T, n, 2)
        Tokens on the unit circle.
    energies : ndarray, shape (T,)
        :math:`E_\\beta = \\frac{1}{2\\beta n^2}\\sum_{ij}e^{\\beta\\langle x_i,x_j\\rangle}`.
    cluster_counts : ndarray, shape (T,)
        Number of groups of tokens separated by arcs longer than ``cluster_tol``.
    beta : float

    Examples
    --------
    Returned by :func:`circle_metastability`; the tokens stay on the circle and the energy
    never decreases:

    >>> import numpy as np
    >>> from token_dynamics.gradient_flow import circle_metastability
    >>> res = circle_metastability(2.0, 6, 10.0, n_times=10, rng=0)
    >>> bool(np.allclose(np.linalg.norm(res.states, axis=-1), 1.0))
    True
    >>> bool(np.all(np.diff(res.energies) >= -1e-9)), res.cluster_counts.shape
    (True, (11,))
    """

    times: FloatArray
    states: FloatArray
    energies: FloatArray
    cluster_counts: FloatArray
    beta: float


def _circle_rhs(_t, theta, beta):
    D = theta[None, :] - theta[:, None]  # D[i, j] = theta_j - theta_i
    S = beta * np.cos(D)
    return (softmax_weights(S, axis=1) * np.sin(D)).sum(axis=1)


def _circle_clusters(theta: FloatArray, tol: float) -> int:
    x = np.sort(np.mod(theta, 2 * np.pi))
    gaps = np.diff(np.append(x, x[0] + 2 * np.pi))
    return max(1, int(np.sum(gaps > tol)))


def circle_metastability(
    beta: float,
    n: int,
    t_max: float,
    *,
    t_min: float = 1e-2,
    n_times: int = 200,
    cluster_tol: float = 1e-2,
    rng: SeedLike = None,
) -> CircleMetastability:
    r"""Run softmax attention (:math:`A = \beta I`, :math:`V = I`) on the circle, in log time.

    The angles obey :math:`\dot\theta_i = \sum_j \mathrm{softmax}_j(\beta\cos(\theta_j -
    \theta_i))\sin(\theta_j-\theta_i)`, the exact reduction of the projected dynamics on
    :math:`\mathbb S^1`. Clusters form at times of order one and then merge after times that
    grow exponentially with :math:`\beta`; the energy climbs a staircase. The ODE is stiff
    inside clusters, hence the implicit LSODA integrator (``rtol=1e-8``).

    Parameters
    ----------
    beta : float
        Inverse temperature, > 0.
    n : int
        Number of tokens, drawn uniformly on the circle.
    t_max : float
        Final time.
    t_min : float
        First positive output time (outputs are log-spaced, plus ``t = 0``).
    n_times : int
        Number of log-spaced output times.
    cluster_tol : float
        Arc length above which two neighbouring tokens are in different clusters.
    rng : Generator, int or None

    Returns
    -------
    CircleMetastability

    Raises
    ------
    FloatingPointError
        If the integrator fails (naming the time and the method).

    References
    ----------
    Geshkovski et al., arXiv:2312.10794 (metastability); Castin et al., arXiv:2501.18322.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.gradient_flow import circle_metastability
    >>> res = circle_metastability(4.0, 8, 50.0, n_times=20, rng=0)
    >>> bool(np.all(np.diff(res.energies) >= -1e-9)), res.states.shape
    (True, (21, 8, 2))
    """
    n = check_int(n, "n", minimum=2)
    beta = check_positive(beta, "beta")
    t_max = check_positive(t_max, "t_max")
    t_min = check_positive(t_min, "t_min")
    if t_min >= t_max:
        raise ValueError(f"`t_min` must be below `t_max` = {t_max}; got {t_min}.")
    n_times = check_int(n_times, "n_times", minimum=2)
    cluster_tol = check_positive(cluster_tol, "cluster_tol")
    theta0 = as_rng(rng).uniform(0.0, 2 * np.pi, n)
    times = np.concatenate([[0.0], np.geomspace(t_min, t_max, n_times)])
    with warnings.catch_warnings(record=True) as caught:  # LSODA warns before it fails
        warnings.simplefilter("always")
        sol = solve_ivp(
            _circle_rhs, (0.0, t_max), theta0, method="LSODA", t_eval=times, args=(beta,),
            rtol=1e-8, atol=1e-10,
        )  # fmt: skip
    if caught and sol.status == 0:
        sol.status, sol.message = -1, str(caught[0].message)
    if sol.status != 0:  # the library's failure policy: a numerical failure names time, method
        t_fail = float(sol.t[-1]) if sol.t.size else 0.0
        raise FloatingPointError(
            f"the circle dynamics stopped after t = {time_text(t_fail)} with method='LSODA': "
            f"{sol.message} Lower `beta` or `t_max`."
        )
    theta = sol.y.T
    states = np.stack([np.cos(theta), np.sin(theta)], axis=-1)
    energies = np.array([interaction_energy(X, beta=beta) for X in states])
    counts = np.array([_circle_clusters(th, cluster_tol) for th in theta])
    return CircleMetastability(times, states, energies, counts, beta)
