r"""The exponents of an MLP noise: Table 1, Remark 1.5, Assumption 1, Proposition 1.5 (private
module).

- :func:`noise_exponents`, :func:`relu_noise_exponents`, :func:`noise_exponent_table` --
  :math:`\kappa(1)`, :math:`\kappa'(1)`, the top Lyapunov exponent :math:`\lambda_1` and the
  coercivity :math:`\bar\lambda` of Agazzi et al. (2026);
- :func:`check_assumption_1` -- their Assumption 1, or :class:`AssumptionError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .._guards import float_guard
from .._validation import check_int, check_positive
from ._kernels import kappa, kappa_prime

__all__ = [
    "ODD_ACTIVATIONS",
    "TABLE_1_ACTIVATIONS",
    "TABLE_1_DIMENSIONS",
    "TABLE_1_SIGMAS",
    "AssumptionError",
    "NoiseExponents",
    "check_assumption_1",
    "noise_exponent_table",
    "noise_exponents",
    "relu_noise_exponents",
]

#: Activations for which the MLP field is odd, ``G(-y) = -G(y)``, when both biases vanish.
ODD_ACTIVATIONS = ("tanh", "erf")
#: The grid of the paper's Table 1 and Figures 2-6 (Appendix B).
TABLE_1_ACTIVATIONS = ("relu", "silu", "sigmoid", "tanh")
#: The token dimensions ``d`` of the paper's Table 1.
TABLE_1_DIMENSIONS = (5, 64, 128)
#: The bias standard deviations of the paper's Table 1 (``sigma_U = sigma_W``).
TABLE_1_SIGMAS = (0.0, 0.1)


class AssumptionError(ValueError):
    """A hypothesis of Agazzi et al. (2026), Theorem 1.4 (Assumption 1) does not hold.

    Examples
    --------
    >>> from token_dynamics.stochastic import AssumptionError
    >>> issubclass(AssumptionError, ValueError)
    True
    """


@dataclass(frozen=True)
class NoiseExponents:
    r"""The kernel values and exponents of one MLP noise (one row of the paper's Table 1).

    Attributes
    ----------
    activation : str
    d : int
        Dimension of the tokens.
    sigma_U, sigma_W : float
        Standard deviations of the two biases.
    kappa_1, kappa_prime_1 : float
        :math:`\kappa(1)` and :math:`\kappa'(1)`.
    lambda_1 : float
        Top Lyapunov exponent of the noise flow, :math:`\frac{d-3}2\kappa'(1) -
        \frac{d-1}2\kappa(1)` (Remark 1.5).
    lambda_bar : float
        :math:`\bar\lambda = (d-1)\kappa'(1) - (d-3)\kappa(1)` (Assumption 1).

    Examples
    --------
    >>> from token_dynamics.stochastic import noise_exponents
    >>> row = noise_exponents("tanh", d=4)
    >>> row.odd, row.assumption_1
    (True, False)
    """

    activation: str
    d: int
    sigma_U: float
    sigma_W: float
    kappa_1: float
    kappa_prime_1: float
    lambda_1: float
    lambda_bar: float

    @property
    def odd(self) -> bool:
        """Whether the MLP field is almost surely odd (odd activation, both biases zero)."""
        return self.activation in ODD_ACTIVATIONS and self.sigma_U == 0 and self.sigma_W == 0

    @property
    def assumption_1(self) -> bool:
        r"""True when Assumption 1 holds (the field is not odd and :math:`\bar\lambda < 0`)."""
        return (not self.odd) and self.lambda_bar < 0


def _exponents(activation, d, sigma_U, sigma_W, k1, k1p) -> NoiseExponents:
    lam_1 = 0.5 * (d - 3) * k1p - 0.5 * (d - 1) * k1
    lam_bar = (d - 1) * k1p - (d - 3) * k1
    return NoiseExponents(
        activation, d, sigma_U, sigma_W, float(k1), float(k1p), float(lam_1), float(lam_bar)
    )


def _noise_args(d: object, sigma_U: object, sigma_W: object) -> tuple[int, float, float]:
    return (
        check_int(d, "d", minimum=2),
        check_positive(sigma_U, "sigma_U", allow_zero=True),
        check_positive(sigma_W, "sigma_W", allow_zero=True),
    )


def noise_exponents(
    activation: str, *, d: int, sigma_U: float = 0.0, sigma_W: float = 0.0
) -> NoiseExponents:
    r"""The kernel values and the exponents :math:`\lambda_1`, :math:`\bar\lambda` of one MLP noise.

    .. math::

        \lambda_1 = \frac{d-3}2\kappa'(1) - \frac{d-1}2\kappa(1), \qquad
        \bar\lambda = (d-1)\kappa'(1) - (d-3)\kappa(1), \qquad
        \lambda_1 = \frac{\bar\lambda}2 - \kappa(1) - \kappa'(1),

    with :math:`\kappa(1)` (§1.3.2) and :math:`\kappa'(1)` (Lemma 4.2) from
    :func:`token_dynamics.stochastic.kappa` and :func:`token_dynamics.stochastic.kappa_prime`.

    Parameters
    ----------
    activation : str
        One of :data:`token_dynamics.stochastic.ACTIVATIONS`.
    d : int
        Dimension of the tokens, at least 2.
    sigma_U, sigma_W : float
        Standard deviations of the inner and outer biases.

    Returns
    -------
    NoiseExponents

    Raises
    ------

    ValueError
        If `activation` is unknown, `d` < 2, or a bias is negative or not finite.
    FloatingPointError
        If :math:`\kappa(1)` exceeds the float64 range (ReLU and SiLU at biases near 1e154).

    References
    ----------
    Agazzi et al., arXiv:2604.26898, Remark 1.5, Assumption 1, §1.3.2, Lemma 4.2 and Table 1.

    Examples
    --------
    >>> from token_dynamics.stochastic import noise_exponents
    >>> row = noise_exponents("relu", d=5)
    >>> round(row.lambda_1, 12), round(row.lambda_bar, 12)
    (-0.1, 0.2)
    """
    d, sigma_U, sigma_W = _noise_args(d, sigma_U, sigma_W)
    k1 = float(kappa(1.0, activation, d=d, sigma_U=sigma_U, sigma_W=sigma_W))
    k1p = float(kappa_prime(1.0, activation, d=d, sigma_U=sigma_U, sigma_W=sigma_W))
    return _exponents(activation, d, sigma_U, sigma_W, k1, k1p)


def relu_noise_exponents(d: int, *, sigma_U: float = 0.0, sigma_W: float = 0.0) -> NoiseExponents:
    r"""The closed forms of Agazzi et al. (2026), Proposition 1.5 (the kernel values are from its
    proof), for the ReLU activation,

    .. math::

        \kappa(1) = \tfrac12\big(\tfrac1d + \sigma_U^2\big) + \sigma_W^2, \quad
        \kappa'(1) = \tfrac1{2d},

        \lambda_1 = -\frac1{2d} - \frac{(\sigma_U^2 + 2\sigma_W^2)(d-1)}4, \quad
        \bar\lambda = \frac1d - \frac{(\sigma_U^2 + 2\sigma_W^2)(d-3)}2 .

    Parameters
    ----------
    d : int
    sigma_U, sigma_W : float

    Returns
    -------
    NoiseExponents

    Raises
    ------

    ValueError
        If `d` < 2 or a bias is negative or not finite.
    FloatingPointError
        If an exponent exceeds the float64 range (biases near 1e154).

    References
    ----------
    Agazzi et al., arXiv:2604.26898, Proposition 1.5 (proved as Proposition 4.3).

    Examples
    --------
    >>> from token_dynamics.stochastic import relu_noise_exponents
    >>> relu_noise_exponents(64, sigma_U=0.1, sigma_W=0.1).lambda_bar
    -0.899375
    """
    d, sigma_U, sigma_W = _noise_args(d, sigma_U, sigma_W)
    fix = "lower `sigma_U` or `sigma_W` (the exponents grow like their squares)"
    with float_guard("the ReLU noise exponents", fix):
        sU, sW = np.float64(sigma_U), np.float64(sigma_W)
        s = sU**2 + 2 * sW**2
        k1 = 0.5 * (1 / d + sU**2) + sW**2
        lam_1 = -1 / (2 * d) - s * (d - 1) / 4
        lam_bar = 1 / d - s * (d - 3) / 2
    k1p = 1 / (2 * d)
    return NoiseExponents("relu", d, sigma_U, sigma_W, float(k1), k1p, float(lam_1), float(lam_bar))


def noise_exponent_table(
    *,
    activations: Sequence[str] = TABLE_1_ACTIVATIONS,
    dimensions: Sequence[int] = TABLE_1_DIMENSIONS,
    sigmas: Sequence[float] = TABLE_1_SIGMAS,
) -> list[NoiseExponents]:
    r"""The paper's Table 1: :func:`noise_exponents` over a grid, with :math:`\sigma_U = \sigma_W`.

    Parameters
    ----------
    activations : sequence of str
    dimensions : sequence of int
    sigmas : sequence of float
        Bias standard deviations, ``sigma_U = sigma_W = sigma``.

    Returns
    -------
    list of NoiseExponents
        Activation-major, then dimension, then sigma (the paper's order).

    Raises
    ------

    ValueError
        If `activation` is unknown, `d` < 2, or a bias is negative or not finite.
    FloatingPointError
        If :math:`\kappa(1)` exceeds the float64 range (ReLU and SiLU at biases near 1e154).

    References
    ----------
    Agazzi et al., arXiv:2604.26898, Appendix B, Table 1.

    Examples
    --------
    >>> from token_dynamics.stochastic import noise_exponent_table
    >>> rows = noise_exponent_table(activations=["relu"], dimensions=[5], sigmas=[0.0])
    >>> rows[0].kappa_1
    0.1
    """
    return [
        noise_exponents(a, d=d, sigma_U=s, sigma_W=s)
        for a in activations
        for d in dimensions
        for s in sigmas
    ]


def check_assumption_1(
    activation: str, *, d: int, sigma_U: float = 0.0, sigma_W: float = 0.0
) -> NoiseExponents:
    r"""Return the exponents if Assumption 1 of Agazzi et al. (2026) holds; raise otherwise.

    Assumption 1: the MLP field is almost surely not odd and
    :math:`\bar\lambda = (d-1)\kappa'(1) - (d-3)\kappa(1) < 0` (which forces :math:`d > 3`).

    Parameters
    ----------
    activation, d, sigma_U, sigma_W
        As in :func:`noise_exponents`.

    Returns
    -------
    NoiseExponents

    Raises
    ------
    AssumptionError
        Naming the failing condition and what would fix it.
    ValueError
        If an argument is invalid (as in :func:`noise_exponents`).

    References
    ----------
    Agazzi et al., arXiv:2604.26898, Assumption 1 and Theorem 1.4.

    Examples
    --------
    >>> from token_dynamics.stochastic import check_assumption_1
    >>> check_assumption_1("relu", d=64, sigma_U=0.1, sigma_W=0.1).lambda_bar < 0
    True
    >>> check_assumption_1("relu", d=64)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    token_dynamics.stochastic._exponents.AssumptionError: Assumption 1 fails: ...
    """
    row = noise_exponents(activation, d=d, sigma_U=sigma_U, sigma_W=sigma_W)
    if row.odd:
        raise AssumptionError(
            f"Assumption 1 fails: with `activation` = {activation!r} and zero biases the MLP "
            "field is odd (antipodal tokens stay antipodal); give `sigma_U` or `sigma_W` a "
            "positive value."
        )
    if row.lambda_bar >= 0:
        hint = "it cannot be negative for `d` <= 3" if row.d <= 3 else "raise `sigma_U`/`sigma_W`"
        raise AssumptionError(
            f"Assumption 1 fails: lambda_bar = (d-1) kappa'(1) - (d-3) kappa(1) = "
            f"{row.lambda_bar:.4g} >= 0 for {activation!r}, d = {row.d}, sigma_U = {sigma_U:g}, "
            f"sigma_W = {sigma_W:g}; {hint}."
        )
    return row
