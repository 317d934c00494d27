r"""How far a covariance path is from a reference path (a closed form, another solver): the
largest relative gap, entry by entry, time by time or over the whole path."""

from __future__ import annotations

import numpy as np

from .._guards import float_guard
from .._typing import ArrayLike
from .._validation import as_real_array
from ._path import GaussianPath

__all__ = ["SCALES", "covariance_path_error"]

#: What a gap is relative to: each entry of the reference (``"entry"``), the largest entry of
#: the reference at the same time (``"time"``), or the largest entry of the whole reference
#: path (``"path"``).
SCALES = ("entry", "time", "path")


def _covariances(value: object, name: str) -> np.ndarray:
    """The covariances of a path as a ``(T, k)`` array: a :class:`GaussianPath`, a ``(T, d, d)``
    array of covariances or a ``(T,)`` array of variances."""
    if isinstance(value, GaussianPath):
        value = value.covariances
    arr = as_real_array(value, name)
    if arr.size == 0:
        raise ValueError(f"`{name}` must hold at least one time; got an empty array.")
    if arr.ndim == 1:
        return arr[:, None]
    if arr.ndim == 3 and arr.shape[1] == arr.shape[2]:
        return arr.reshape(arr.shape[0], -1)
    raise ValueError(
        f"`{name}` must be a GaussianPath, a (T, d, d) array of covariances or a (T,) array of "
        f"variances; got shape {arr.shape}."
    )


@float_guard("the covariance path error", "rescale both paths")
def covariance_path_error(
    path: GaussianPath | ArrayLike, reference: GaussianPath | ArrayLike, *, scale: str = "time"
) -> float:
    r"""Largest relative gap between the covariances of a path and of a reference path.

    .. math::

        \text{entry}: \max_{t,k,l} \Big|\frac{\Sigma_{kl}(t)}{\Sigma^{\rm ref}_{kl}(t)}
        - 1\Big|,\qquad
        \text{time}: \max_t \frac{\max_{kl}|\Sigma(t) - \Sigma^{\rm ref}(t)|}
        {\max_{kl}|\Sigma^{\rm ref}(t)|},\qquad
        \text{path}: \frac{\max_{t,kl}|\Sigma(t) - \Sigma^{\rm ref}(t)|}
        {\max_{t,kl}|\Sigma^{\rm ref}(t)|}.

    Parameters
    ----------
    path, reference : GaussianPath or array_like
        Paths at the same times: a :class:`GaussianPath`, its ``(T, d, d)`` covariances, or a
        ``(T,)`` array of variances (``d = 1``).
    scale : {"entry", "time", "path"}
        What each gap is relative to (see :data:`SCALES`): ``"entry"`` for a scalar variance
        (every entry of the reference must be nonzero), ``"time"`` for a covariance that grows
        or shrinks along the path, ``"path"`` for one relative gap over the whole run.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If the paths do not have the same shape (times and dimension), `scale` is not one of
        :data:`SCALES`, or a reference entry (``"entry"``), time (``"time"``) or path
        (``"path"``) it is relative to is zero.
    TypeError
        If an array argument is not real.
    FloatingPointError
        If a relative gap overflows float64.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.gaussian import covariance_path_error
    >>> reference = np.array([1.0, 2.0, 4.0])
    >>> path = np.array([1.5, 2.0, 4.0])  # off by 0.5 at the first time
    >>> covariance_path_error(path, reference, scale="entry")
    0.5
    >>> covariance_path_error(path, reference, scale="path")  # 0.5 / 4
    0.125
    """
    if scale not in SCALES:
        raise ValueError(f"`scale` must be one of {SCALES}; got {scale!r}.")
    S = _covariances(path, "path")
    R = _covariances(reference, "reference")
    if S.shape != R.shape:
        raise ValueError(
            f"`path` and `reference` must have the same times and dimension; got covariances "
            f"of shapes {S.shape} and {R.shape} (as (times, entries)). Evaluate the reference "
            "at `path.times`."
        )
    if S.shape[0] == 0:
        raise ValueError("`path` and `reference` must hold at least one time; got none.")
    if scale == "entry":
        if np.any(R == 0):
            raise ValueError(
                "`reference` has a zero entry: a gap relative to it is undefined; use "
                "scale='time' or scale='path'."
            )
        return float(np.max(np.abs(S / R - 1.0)))
    gaps = np.abs(S - R)
    if scale == "time":
        sizes = np.abs(R).max(axis=1)
        if np.any(sizes == 0):
            raise ValueError(
                "`reference` is the zero matrix at some time: a gap relative to it is "
                "undefined; use scale='path'."
            )
        return float(np.max(gaps.max(axis=1) / sizes))
    size = np.abs(R).max()
    if size == 0:
        raise ValueError("`reference` is zero along the whole path: no relative gap exists.")
    return float(gaps.max() / size)
