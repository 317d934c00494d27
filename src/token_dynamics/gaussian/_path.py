"""The one result type of a Gaussian path: moments at times, and how the run ended."""

from __future__ import annotations

from dataclasses import dataclass

from .._typing import FloatArray

__all__ = ["STATUSES", "GaussianPath"]

#: How a run of a Gaussian path can end: it reached the last requested time, it met a
#: finite-time blow-up (``blowup_time`` says when), or it stopped on a numerical failure
#: (overflow of an exponentially growing covariance, a run too stiff to follow) said in
#: ``message``.
STATUSES = ("completed", "blowup", "failed")


@dataclass(frozen=True)
class GaussianPath:
    r"""Moments :math:`(\alpha(t), \Sigma(t))` of a Gaussian moved by attention, at times reached.

    Returned by every moment solver (:func:`solve_moments`), by the closed forms
    (:func:`softmax_gaussian_1d`, :func:`softmax_gaussian_centred`) and, with Monte-Carlo
    errors added, by the particle estimate (:class:`ParticleMoments`).

    Attributes
    ----------
    times : (T,) array, the requested times reached (all of them unless the run stopped).
    means : (T, d) array.
    covariances : (T, d, d) array, symmetric positive semidefinite.
    status : ``"completed"``, ``"blowup"`` or ``"failed"`` (see :data:`STATUSES`).
    message : str, what happened, in words.
    blowup_time : float or None, estimated blow-up time when ``status == "blowup"``.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.gaussian import GaussianPath
    >>> path = GaussianPath(np.array([0.0]), np.zeros((1, 1)), np.ones((1, 1, 1)))
    >>> path.status, path.blew_up
    ('completed', False)
    """

    times: FloatArray
    means: FloatArray
    covariances: FloatArray
    status: str = "completed"
    message: str = "reached the final time."
    blowup_time: float | None = None

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"`status` must be one of {STATUSES}; got {self.status!r}.")

    @property
    def blew_up(self) -> bool:
        """Whether the run met a finite-time blow-up."""
        return self.status == "blowup"


def _check_before(times: FloatArray, t_star: float, what: str = "the solution") -> None:
    if times[-1] >= t_star:
        raise ValueError(
            f"`times` reach {times[-1]:g}, past the finite-time blow-up of {what} at "
            f"t* = {t_star:.6g}: they must stay before the blow-up time."
        )
