"""Array libraries other than numpy (torch, JAX, CuPy, any array-API namespace): the one door.

numpy is the reference path and the default. A function that accepts other arrays asks
:func:`is_numpy` first: numpy arrays, lists, tuples and scalars go on to the numpy code
unchanged (one ``type`` test, no import of anything new); any other array gets its library's
array-API namespace from :func:`namespace` (``array_api_compat.array_namespace``, imported only
then), and the result comes back in the caller's array type, on the caller's device
(:func:`device`) and in the caller's floating dtype (:func:`float_dtype`).

Why array-api-compat: it gives torch, JAX, CuPy, Dask and numpy one namespace of the array API
standard (the route SciPy and scikit-learn take), is a single pure-Python package without
dependencies, and maps to each library's own functions, so generic code runs at the library's
speed. A library with a faster kernel for a whole formula (fused attention) gets a named fast
path beside the generic formula, chosen by :func:`library`.

References
----------
Consortium for Python Data API Standards, *Python array API standard*, v2023.12,
https://data-apis.org/array-api/ (sections "Array object", "Linear algebra functions").

Examples
--------
>>> import numpy as np
>>> from token_dynamics._backend import is_numpy
>>> is_numpy(np.zeros(2)), is_numpy([1.0, 2.0])
(True, True)
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np

__all__ = [
    "all_finite",
    "device",
    "device_normal",
    "erf",
    "float_dtype",
    "has_float64",
    "is_numpy",
    "library",
    "namespace",
    "scalar",
    "to_namespace",
    "to_numpy",
]

#: Types that always take the numpy path (``np.asarray`` reads them without an array library).
_NUMPY_TYPES = (np.ndarray, np.generic, list, tuple, int, float, bool)


#: Top-level modules of array types that take the array-API path even without
#: ``__array_namespace__`` (older torch releases lack it; array-api-compat wraps them).
_ARRAY_MODULES = frozenset({"torch", "jax", "jaxlib", "cupy", "dask", "sparse", "ndonnx"})


def _foreign(a: object) -> bool:
    """Whether ``a`` is an array of a library other than numpy."""
    return hasattr(a, "__array_namespace__") or (
        type(a).__module__.partition(".")[0] in _ARRAY_MODULES
    )


def is_numpy(*arrays: object) -> bool:
    """Whether every argument takes the numpy path: anything but an array of another library
    (a torch tensor, a JAX array, any object with ``__array_namespace__``). numpy arrays,
    lists, numbers and ``None`` are recognised by one ``isinstance`` test; anything else
    that is no foreign array (a string, a dict) also goes to the numpy path, whose
    validation names it.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics._backend import is_numpy
    >>> is_numpy(np.eye(2), None, 1.0)
    True
    """
    return all(a is None or isinstance(a, _NUMPY_TYPES) or not _foreign(a) for a in arrays)


def namespace(*arrays: object) -> ModuleType:
    """The array-API namespace of the arrays (``None`` and Python scalars are ignored).

    Raises
    ------
    ModuleNotFoundError
        If array-api-compat is not installed (``pip install token-dynamics[torch]`` or
        ``[jax]`` brings it).
    TypeError
        If the arrays come from different libraries.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics._backend import namespace
    >>> namespace(np.zeros(2)).__name__  # doctest: +SKIP
    'array_api_compat.numpy'
    """
    try:
        from array_api_compat import array_namespace
    except ModuleNotFoundError as exc:  # pragma: no cover - depends on the environment
        raise ModuleNotFoundError(
            "arrays other than numpy's need the package `array-api-compat`; install it with "
            "`pip install token-dynamics[torch]` (or `[jax]`, `[cupy]`)."
        ) from exc
    arrs = [a for a in arrays if a is not None and not isinstance(a, int | float | bool)]
    kind = type(arrs[0]) if arrs else None
    if kind is not None and all(type(a) is kind for a in arrs):  # one type: one namespace
        xp = _NAMESPACES.get(kind)
        if xp is None:
            _refuse_tracers(kind)
            xp = _NAMESPACES[kind] = array_namespace(arrs[0])
        return xp
    for a in arrs:
        _refuse_tracers(type(a))
    try:
        return array_namespace(*arrs)
    except TypeError as exc:
        kinds = sorted({type(a).__module__ + "." + type(a).__name__ for a in arrs})
        raise TypeError(
            f"the arrays passed come from different array libraries ({', '.join(kinds)}); "
            "pass them all from one library (convert the parameters with that library's "
            "`asarray`)."
        ) from exc


def _refuse_tracers(kind: type) -> None:
    """Refuse the abstract arrays of ``jax.jit``, ``jax.grad`` and ``jax.vmap`` (tracers): the
    library reads values on the host (its checks, its step counts), which a traced function
    cannot do, and vmap hides the token axis."""
    if kind.__module__.partition(".")[0] in ("jax", "jaxlib") and "Tracer" in kind.__name__:
        raise TypeError(
            "token_dynamics cannot run inside jax.jit, jax.grad or jax.vmap: it reads values on "
            "the host to check them (finiteness, the float range) and to choose its steps. Call "
            "it on concrete JAX arrays, outside the transformation (its own computations are "
            "compiled already)."
        )


#: The namespace of each array type met (``namespace``): array-api-compat's lookup, which
#: tests the array's library one by one, costs a few microseconds a call.
_NAMESPACES: dict[type, ModuleType] = {}


def all_finite(xp: ModuleType, *arrays: Any) -> bool:
    """Whether every entry of the floating ``arrays`` of ``xp`` is finite, read in one transfer
    to the host: the sum of all their entries, which a NaN or an infinite entry makes
    non-finite. A finite sum proves it; a sum that overflowed alone is told apart by a second
    pass over the entries. (One reduction costs a sixth of ``all(isfinite(a))``, which
    writes a boolean array first: 2 against 36 us on a 1024 x 16 float32 tensor of torch's CPU.)
    """
    with np.errstate(over="ignore", invalid="ignore"):  # numpy-backed namespaces warn
        total = xp.sum(arrays[0])
        for a in arrays[1:]:
            total = total + xp.sum(a)
    if math.isfinite(scalar(total)):
        return True
    return all(bool(xp.all(xp.isfinite(a))) for a in arrays)


def scalar(v: Any) -> float:
    """The value of a 0-d array as a float, read apart from its autograd graph (torch warns when
    a tensor that requires grad is converted)."""
    detach = getattr(v, "detach", None)
    return float(v if detach is None else detach())


@functools.cache
def library(xp: ModuleType) -> str:
    """Short name of the library behind a namespace: ``"torch"``, ``"jax"``, ``"cupy"``,
    ``"numpy"`` or the namespace's module name (``"array_api_strict"``)."""
    name = xp.__name__
    for lib in ("torch", "jax", "cupy", "numpy"):
        if name == lib or name.startswith(lib + ".") or name.endswith("." + lib):
            return lib
    return name.split(".")[0]


def device(x: Any) -> Any:
    """The device an array lives on (``array_api_compat.device``)."""
    from array_api_compat import device as _device

    return _device(x)


def float_dtype(xp: ModuleType, x: Any, dtype: object | None = None) -> Any:
    """The computing dtype: ``dtype`` when given (``"float64"``/``"float32"`` or the library's
    own), else float32 for float32 input and float64 otherwise (as on the numpy path), refused
    by name where the library has no float64 (JAX without x64 gave float32 with a warning of its
    own only)."""
    if dtype is not None:
        try:  # numpy's names and types ('f4', np.float32, jnp.float32)
            name = np.dtype(dtype).name  # type: ignore[call-overload]
        except TypeError:  # another library's dtype object (torch.float32)
            name = str(dtype).split(".")[-1]
        if name not in ("float64", "float32"):
            raise ValueError(
                f"`dtype` must be float64 or float32; got {dtype!r}. Pass dtype='float64'."
            )
        if name == "float64" and not has_float64(xp, x):
            raise TypeError(
                "`dtype` asks for float64, which the array library of the tokens lacks on their "
                "device (JAX without `jax.config.update('jax_enable_x64', True)`, torch's 'mps'); "
                "enable it, or pass dtype='float32'."
            )
        return getattr(xp, name)
    if x.dtype == xp.float32:
        return xp.float32
    if x.dtype == xp.float64:
        return xp.float64
    if not has_float64(xp, x):  # integers or half floats: float64 by default, as on numpy's path
        raise TypeError(
            f"tokens of dtype {x.dtype} are computed in float64 by default, which the array "
            "library of the tokens lacks on their device (JAX without "
            "`jax.config.update('jax_enable_x64', True)`, torch's 'mps'); enable it, or pass "
            "dtype='float32'."
        )
    return xp.float64


def has_float64(xp: ModuleType, like: Any) -> bool:
    """Whether ``xp`` holds float64 arrays on the device of ``like`` (JAX does not unless
    ``jax_enable_x64`` is set; torch's Apple-silicon device ``mps`` does not)."""
    with warnings.catch_warnings():  # JAX warns, and gives float32, when x64 is off
        warnings.simplefilter("ignore")
        try:
            z = xp.zeros(1, dtype=xp.float64, device=device(like))
        except (TypeError, RuntimeError, ValueError):
            return False
    return bool(z.dtype == xp.float64)


def to_numpy(a: Any) -> np.ndarray:
    """A numpy array with the values of ``a``, copied to the host when ``a`` lives on a device
    (a CUDA tensor, a CuPy array): how parameters and weights given as arrays of another
    library are read, since ``np.asarray`` refuses device arrays and tensors that carry a
    gradient.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics._backend import to_numpy
    >>> to_numpy([1.0, 2.0])
    array([1., 2.])
    """
    top = type(a).__module__.partition(".")[0]
    if top == "torch":
        return np.asarray(a.detach().cpu().numpy())
    if top == "cupy":
        return np.asarray(a.get())
    return np.asarray(a)


def to_namespace(xp: ModuleType, a: Any, like: Any, dtype: Any) -> Any:
    """``a`` (a numpy array, a list, or an array of ``xp``) as an array of ``xp`` of ``dtype``
    on the device of ``like``: parameters given as numpy arrays follow the tokens."""
    if isinstance(a, np.ndarray | np.generic | list | tuple | float | int):
        a = np.array(a, dtype=np.float64, order="C")  # writable (torch warns on read-only)
        return xp.asarray(a, dtype=dtype, device=device(like))
    return xp.astype(a, dtype)


def device_normal(xp: ModuleType, like: Any, rng: object) -> Callable[[tuple[int, ...], Any], Any]:
    """``normal(shape, dtype)``: standard normal draws made by the library of ``xp`` on the
    device of ``like`` (no draw in numpy and transfer), from one generator seeded once by
    ``rng``.

    torch: a ``torch.Generator`` on that device (``rng`` may be one, used as it is); JAX: a
    ``jax.random`` key on that device, split at each draw; CuPy: ``cupy.random.default_rng``
    made on that device. Any other namespace (array-api-strict, numpy-backed) draws with numpy's
    Generator on the host and converts with ``xp.asarray``: a host draw, acceptable only there.
    Every other ``rng`` (an integer seed, a ``SeedSequence``, a numpy Generator or ``None``)
    gives one seed, ``np.random.default_rng(rng).integers(2**63)``, to the library's generator:
    the same ``rng`` repeats the draws on the same library and device; they differ from numpy's.
    torch's CPU generator keeps 32 bits of a seed, so the seed's two 32-bit words are folded
    into one there: two different ``rng`` give the same torch CPU draws with probability
    ``2**-32``.

    Examples
    --------
    >>> import numpy as np
    >>> import array_api_strict as xp  # doctest: +SKIP
    >>> normal = device_normal(xp, xp.zeros(1), 0)  # doctest: +SKIP
    >>> normal((2, 3), xp.float64).shape  # doctest: +SKIP
    (2, 3)
    """
    lib, dev = library(xp), device(like)
    if lib == "torch":
        import torch

        if isinstance(rng, torch.Generator):
            if torch.device(rng.device).type != torch.device(dev).type:
                raise ValueError(
                    f"`rng` is a torch.Generator on {rng.device}, the tokens are on {dev}; "
                    f"pass torch.Generator(device='{dev}') or an integer seed."
                )
            gen = rng
        else:
            gen = torch.Generator(device=dev)
            seed = _seed(rng)
            if gen.device.type == "cpu":  # its Mersenne twister keeps a seed's low 32 bits
                seed = (seed ^ (seed >> 32)) & 0xFFFFFFFF  # fold the high word in, as for JAX
            gen.manual_seed(seed)
        return lambda shape, dtype: torch.randn(shape, generator=gen, dtype=dtype, device=dev)
    seed = _seed(rng)
    if lib == "jax":
        import jax

        # two 32-bit words: a 64-bit seed is cut to its low word when x64 is off
        key = jax.random.fold_in(jax.random.key(seed & 0xFFFFFFFF), seed >> 32)
        state = [jax.device_put(key, dev)]

        def jax_normal(shape: tuple[int, ...], dtype: Any) -> Any:
            state[0], sub = jax.random.split(state[0])
            return jax.random.normal(sub, shape, dtype)

        return jax_normal
    if lib == "cupy":  # pragma: no cover - needs a CUDA device
        import cupy

        with dev:
            cgen = cupy.random.default_rng(seed)

        def cupy_normal(shape: tuple[int, ...], dtype: Any) -> Any:
            with dev:
                return cgen.standard_normal(shape, dtype=dtype)

        return cupy_normal
    host = np.random.default_rng(seed)
    return lambda shape, dtype: xp.asarray(host.standard_normal(shape), dtype=dtype, device=dev)


def _seed(rng: Any) -> int:
    """One seed in ``[0, 2**63)`` drawn from ``rng`` (a seed, a SeedSequence, a Generator or
    ``None``)."""
    try:
        gen = np.random.default_rng(rng)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            "`rng` must be an integer seed, a numpy Generator, None, or for torch tensors a "
            f"torch.Generator on their device; got {type(rng).__name__}."
        ) from exc
    return int(gen.integers(2**63))


def erf(xp: ModuleType, x: Any) -> Any:
    """The error function of an array of ``xp`` (not in the array API standard): torch's,
    JAX's, CuPy's; other namespaces (array-api-strict) through SciPy on the host."""
    lib = library(xp)
    if lib == "torch":
        import torch

        return torch.special.erf(x)
    if lib == "jax":
        import jax.scipy.special

        return jax.scipy.special.erf(x)
    if lib == "cupy":  # pragma: no cover - needs a CUDA device
        import cupyx.scipy.special

        return cupyx.scipy.special.erf(x)
    from scipy import special

    return xp.asarray(special.erf(np.asarray(x)), device=device(x))
