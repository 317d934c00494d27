"""Exact rescalings shared by the diagnostics on arrays of another library: the support of the
weights, the subnormal numbers that a device flushes to zero, and pairwise distances compared
with a tolerance without squaring into underflow (private module)."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

from .._backend import device, library, to_namespace, to_numpy
from .._linalg import power_of_two_scale

__all__ = [
    "flushes_subnormals",
    "scale_result_xp",
    "support_xp",
    "unflushed_xp",
    "within_tol",
    "within_tol_xp",
]

#: Whether a library flushes subnormal numbers on a device, in a dtype (``flushes_subnormals``).
_FLUSHES: dict[tuple[str, str, str], bool] = {}


def flushes_subnormals(xp: ModuleType, like: Any) -> bool:
    """Whether ``xp`` treats subnormal numbers of the dtype of ``like``, on its device, as zero
    (XLA, JAX's compiler, does on the CPU: subnormal inputs read as zero and subnormal results
    come out as zero). Found once per library, device and dtype by halving the smallest normal
    number there."""
    key = (xp.__name__, str(device(like)), str(like.dtype))
    if key not in _FLUSHES:
        tiny = float(xp.finfo(like.dtype).smallest_normal)
        probe = xp.asarray([tiny], dtype=like.dtype, device=device(like))
        _FLUSHES[key] = not bool(xp.all(probe / 2.0 > 0.0))
    return _FLUSHES[key]


def unflushed_xp(xp: ModuleType, X: Any, name: str = "X") -> tuple[Any, float]:
    """``(Xs, c)`` with ``X = c Xs`` exactly, ``c`` a power of two, and no subnormal entry in
    ``Xs`` that the device would flush to zero: ``(X, 1.0)`` unless ``xp`` flushes subnormal
    numbers there and ``X`` holds some. Then ``X`` is read on the host (its subnormal entries
    are invisible to the device: a division there would read them as zero), divided there by the
    power of two at its largest entry, and sent back.

    Raises ``ValueError`` naming `name` if entries remain subnormal after that (they lie more
    than ``2**-1022`` (float64) or ``2**-126`` (float32) times below the largest one).

    Only arrays in the host's memory are read back so (JAX on the CPU, where XLA flushes and the
    read costs no transfer): on a GPU the tokens stay there, and a cloud of subnormal size,
    which XLA may flush in float32, is not looked for.
    """
    if not flushes_subnormals(xp, X) or not _in_host_memory(xp, X):
        return X, 1.0
    Xh = to_numpy(X)
    tiny = np.finfo(Xh.dtype).tiny
    if not np.any((Xh != 0) & (np.abs(Xh) < tiny)):
        return X, 1.0
    c = float(power_of_two_scale(Xh))
    Xs = Xh / Xh.dtype.type(c)  # a division by a power of two: exact for these small entries
    if np.any((Xs != 0) & (np.abs(Xs) < tiny)):
        raise ValueError(
            f"`{name}` holds entries below {tiny:.3g} times its largest one, which "
            f"{library(xp)} on {device(X)} flushes to zero (subnormal numbers), so every result "
            f"would be silently wrong; pass `np.asarray({name})` (numpy keeps them) or set the "
            "negligible entries to zero."
        )
    return to_namespace(xp, Xs, X, X.dtype), c


def _in_host_memory(xp: ModuleType, X: Any) -> bool:
    """Whether an array of ``xp`` lives in the host's memory (a CPU device)."""
    dev = device(X)
    kind = getattr(dev, "platform", None) or getattr(dev, "type", None)  # JAX, torch
    if kind is not None:
        return str(kind) == "cpu"
    return library(xp) not in ("cupy",)  # numpy-backed namespaces (array-api-strict)


def scale_result_xp(xp: ModuleType, R: Any, c: float) -> Any:
    """``c R`` for an array result ``R`` of ``xp`` and a power of two ``c``: on the device, or
    on the host where the device would flush the subnormal numbers that the product may hold."""
    if c == 1.0:
        return R
    if c < 1.0 and flushes_subnormals(xp, R):
        Rh = to_numpy(R)
        return to_namespace(xp, Rh * Rh.dtype.type(c), R, R.dtype)
    return R * c


def support_xp(xp: ModuleType, X: Any, w: np.ndarray) -> tuple[Any, np.ndarray]:
    """``attention._base.positive_keys`` for tokens of another library and weights on the host
    (``as_weights``): the rows of positive weight taken on the device, and those weights."""
    if np.all(w > 0):
        return X, w
    keep = np.flatnonzero(w > 0)
    rows = xp.asarray(keep, device=device(X))
    return xp.take(X, rows, axis=0), w[keep]


def within_tol(D: np.ndarray, tol: float) -> np.ndarray:
    r"""Whether each coordinate difference ``D[..., :]`` has Euclidean norm at most ``tol``,
    without squaring into underflow or overflow: the norm is ``m |D / m|`` with ``m`` the
    largest ``|D_k|``, compared as ``|D / m| <= tol / m``. Zero differences are within any
    ``tol >= 0``; an infinite one (an overflowed difference) within none."""
    m = np.max(np.abs(D), axis=-1)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        safe = np.where(m > 0, m, 1.0)
        ratio = np.sqrt(np.sum((D / safe[..., None]) ** 2, axis=-1))
        return (m == 0) | ((m > 0) & (ratio <= tol / safe))


def within_tol_xp(xp: ModuleType, A: Any, B: Any, tol: float, flushes: bool) -> Any:
    r""":func:`within_tol` of the differences ``A - B`` (broadcast, coordinates last) of arrays
    of ``xp``. Where the device flushes subnormal numbers (``flushes``), a difference it flushed
    to zero comes from unequal coordinates closer than the smallest normal number: within any
    ``tol > 0`` (the caller makes sure that ``tol`` is far above it), never within ``tol = 0``,
    as equal coordinates tell."""
    D = A - B
    m = xp.max(xp.abs(D), axis=-1)
    # the division by m must not meet a reciprocal beyond the normal range (torch divides
    # through one, and 1 / m overflows for a subnormal m): m below smallest_normal / eps (or
    # above its inverse) is first multiplied by 1 / eps**2 (or eps**2), as D and tol are
    finfo = xp.finfo(D.dtype)
    eps, lo = float(finfo.eps), float(finfo.smallest_normal) / float(finfo.eps)
    s = xp.where(
        m < lo,
        xp.full_like(m, eps**-2),
        xp.where(m > 1 / lo, xp.full_like(m, eps**2), xp.ones_like(m)),
    )
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):  # numpy-backed xp warn
        ms = m * s
        safe = xp.where(ms > 0, ms, xp.ones_like(ms))
        ratio = xp.linalg.vector_norm((D * s[..., None]) / safe[..., None], axis=-1)
        near = (ms > 0) & (ratio <= (tol * s) / safe)
    if tol > 0 or not flushes:
        return near | (m == 0)
    return near | xp.all(A == B, axis=-1)
