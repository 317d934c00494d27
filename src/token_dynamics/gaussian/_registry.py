"""The registry from attention fields to their moment ODEs, and the variants without one."""

from __future__ import annotations

from collections.abc import Callable

from .. import attention
from ._equations import L2Moments, LinearMoments, MomentEquations, SinkhornMoments, SoftmaxMoments
from ._multihead import MultiHeadMoments, _split_output_projection

__all__ = ["MOMENT_EQUATIONS", "NOT_GAUSSIAN_PRESERVING", "moment_equations"]


def _multi_head(field: attention.MultiHead) -> MultiHeadMoments:
    heads = tuple(moment_equations(h) for h in field.heads)
    return MultiHeadMoments(heads, W=_split_output_projection(field.W, len(heads)))


#: Registry of the moment ODEs (as SciPy's ``solve_ivp`` ``METHODS``): attention class ->
#: builder of its :class:`MomentEquations` from the field. :func:`moment_equations` walks the
#: field's class hierarchy and uses the first class found here, so a subclass of a registered
#: variant inherits its moment ODE; register a new Gaussian-preserving variant by adding it.
MOMENT_EQUATIONS: dict[type, Callable[..., MomentEquations]] = {
    attention.Softmax: lambda f: SoftmaxMoments(f.A, f.V, beta=f.beta),
    attention.L2: lambda f: L2Moments(f.Qbar, f.Kbar, f.V, s=f.s),
    attention.Sinkhorn: lambda f: SinkhornMoments(f.A, f.V, eps=f.eps),
    attention.Linear: lambda f: LinearMoments(f.A, f.V),
    attention.MultiHead: _multi_head,
}

#: Attention variants whose velocity field is not affine on Gaussians, with the reason; they
#: are looked up before :data:`MOMENT_EQUATIONS`.
NOT_GAUSSIAN_PRESERVING: dict[type, str] = {
    attention.Sigmoid: "the sigmoid of the score is not an exponential, so the tilted key law "
    "is not Gaussian and the velocity is not affine in the token",
    attention.Hardmax: "the arg-max selects a single key, so the velocity is piecewise and not "
    "affine",
    attention.Causal: "the mask makes the velocity depend on the position coordinate, so a "
    "Gaussian in the token coordinate does not stay Gaussian in general",
    attention.Unnormalised: "the missing normaliser multiplies the softmax field by "
    "exp(<Ax, alpha> + |Sigma^(1/2) A x|^2 / 2), which is not affine in the token",
}


def moment_equations(field: attention.AttentionField | MomentEquations) -> MomentEquations:
    """Moment ODE of an attention field of ``token_dynamics.attention``.

    ``Softmax``, ``L2``, ``Sinkhorn``, ``Linear`` and ``MultiHead`` (of those) map to the
    matching :class:`MomentEquations` through the registry :data:`MOMENT_EQUATIONS`; a
    :class:`MomentEquations` is returned unchanged.

    Parameters
    ----------
    field : AttentionField or MomentEquations
        A Gaussian-preserving attention field, or moment equations already built.

    Returns
    -------
    MomentEquations
        The moment ODE, with ``affine`` and ``rhs``.

    Raises
    ------
    ValueError
        For a variant that does not preserve Gaussian measures (``Sigmoid``, ``Hardmax``,
        ``Causal``, ``Unnormalised``: :data:`NOT_GAUSSIAN_PRESERVING`), naming the reason; or
        for an unknown object.

    Examples
    --------
    >>> from token_dynamics.attention import Softmax
    >>> from token_dynamics.gaussian import moment_equations
    >>> type(moment_equations(Softmax([[1.0]], [[1.0]]))).__name__
    'SoftmaxMoments'
    """
    return _moment_equations(field, "field")


def _moment_equations(field: object, name: str) -> MomentEquations:
    """:func:`moment_equations`, with the argument named `name` in errors."""
    if isinstance(field, MomentEquations):
        return field
    mro = type(field).__mro__
    for cls in mro:
        if cls in NOT_GAUSSIAN_PRESERVING:
            raise ValueError(
                f"`{name}` is {cls.__name__} attention, which does not preserve Gaussian "
                f"measures: {NOT_GAUSSIAN_PRESERVING[cls]}. It has no moment ODE; estimate its "
                "moments from particles with particle_moments()."
            )
    for cls in mro:
        if cls in MOMENT_EQUATIONS:
            return MOMENT_EQUATIONS[cls](field)
    raise ValueError(
        f"`{name}` must be a Gaussian-preserving attention field (Softmax, L2, Sinkhorn, Linear, "
        f"MultiHead) or a MomentEquations; got {type(field).__name__}."
    )
