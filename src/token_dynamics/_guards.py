"""What a computation reports while it runs (private module, the ground floor).

:func:`float_guard` is the numerical half of the failure policy: code run under it that would
overflow, divide by zero or produce an invalid value raises ``FloatingPointError`` naming the
quantity and the remedy, instead of returning NaN or inf with a ``RuntimeWarning``.
:func:`checked_finite` reports, in the same words, an overflow that numpy does not flag.
:func:`progress_bar` is the bar a long solver shows when asked (``progress=True``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, NoReturn, TypeVar

import numpy as np

from ._validation import check_bool

if TYPE_CHECKING:  # tqdm is imported only when a bar is asked for
    from tqdm import tqdm

__all__ = ["checked_finite", "float_guard", "progress_bar"]

T = TypeVar("T")


def progress_bar(progress: object, total: float, desc: str) -> tqdm[NoReturn] | None:
    """Check the `progress` flag of a solver and return a ``tqdm`` bar (or None when off)."""
    if not check_bool(progress, "progress"):
        return None
    try:
        from tqdm import tqdm
    except ImportError as exc:  # pragma: no cover - tqdm is in the pinned environment
        raise ImportError(
            "`progress=True` needs tqdm: pip install 'token-dynamics[progress]'."
        ) from exc
    return tqdm(total=total, desc=desc, leave=False)


@contextmanager
def float_guard(quantity: str, fix: str) -> Iterator[None]:
    """Run a computation with float64 overflow, division by zero and invalid values raised.

    A ``FloatingPointError`` from numpy becomes one that names `quantity` (what was being
    computed) and says what to do (`fix`); underflow to zero stays silent, as it is harmless.
    Usable as a context manager or as a decorator.

    Examples
    --------
    >>> with float_guard("the energy", "scale `X` down"):  # doctest: +ELLIPSIS
    ...     np.exp(np.array([1000.0]))
    Traceback (most recent call last):
    ...
    FloatingPointError: the energy leaves the float64 range (overflow); scale `X` down.
    """
    with np.errstate(over="raise", divide="raise", invalid="raise", under="ignore"):
        try:
            yield
        except FloatingPointError as exc:
            kind = str(exc).split(" encountered")[0]
            if " encountered" not in str(exc):  # already ours: pass it on unchanged
                raise
            raise FloatingPointError(_left_range(quantity, kind, fix)) from None


def _left_range(quantity: str, kind: str, fix: str) -> str:
    return f"{quantity} leaves the float64 range ({kind}); {fix}."


def checked_finite(value: T, quantity: str, fix: str) -> T:
    """`value` (a float or an array) if every entry is finite; else the ``FloatingPointError``
    :func:`float_guard` raises for an overflow. For what numpy computes without flagging an
    overflow, which the guard cannot see: ``np.einsum`` on every numpy, ``np.linalg.norm``
    before numpy 2.3.

    >>> checked_finite(np.einsum("i,i->", [1e200, 1e200], [1e200, 1e200]), "the sum", "rescale")
    Traceback (most recent call last):
    ...
    FloatingPointError: the sum leaves the float64 range (overflow); rescale.
    """
    if not np.all(np.isfinite(np.asarray(value))):
        raise FloatingPointError(_left_range(quantity, "overflow", fix))
    return value
