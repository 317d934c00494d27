"""Symmetric and covariance matrices: the argument checks of the chapter (private)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validation import as_matrix

#: Relative tolerance for "symmetric" and for the sign of an eigenvalue: a few hundred ulps of
#: the matrix norm, the rounding of products such as ``V @ inv(A)``.
SYM_RTOL = 1e-10


def _symmetric(M: np.ndarray, name: str) -> np.ndarray:
    scale = max(1.0, float(np.abs(M).max()))
    if M.shape[0] != M.shape[1] or np.abs(M - M.T).max() > SYM_RTOL * scale:
        raise ValueError(
            f"`{name}` must be a symmetric (d, d) matrix here; pass (M + M.T) / 2 if the "
            "antisymmetric part is rounding."
        )
    return 0.5 * (M + M.T)


def _square(M: Any, name: str, d: int) -> np.ndarray:
    return as_matrix(M, name, shape=(d, d))


def _cov(cov: Any, d: int) -> np.ndarray:
    S = _symmetric(_square(cov, "cov", d), "cov")
    if np.linalg.eigvalsh(S).min() < -SYM_RTOL * max(1.0, np.abs(S).max()):
        raise ValueError("`cov` must be positive semidefinite; its smallest eigenvalue is < 0.")
    return S
