"""Every public name carries the numpydoc sections the API reference promises.

The rule is `tools/api_coverage.py`'s: a function or class documents its ``Parameters`` (a
result class its ``Attributes``) and has ``Examples`` (run as doctests by ``--doctest-modules``)
that import every name they use, so that they also run when copied; an exception has a
docstring of its own; a constant has a ``#:`` description.
"""

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _api_coverage():
    spec = importlib.util.spec_from_file_location("api_coverage", ROOT / "tools/api_coverage.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("api_coverage", module)
    spec.loader.exec_module(module)
    return module


def test_public_names_have_numpydoc_sections():
    missing = _api_coverage().missing_sections()
    listing = "\n".join(f"{name}: no {', '.join(lacks)}" for name, lacks in missing.items())
    assert not missing, f"{len(missing)} public names lack a docstring section:\n{listing}"


def test_the_rule_names_what_is_missing():
    """The check can fail: each kind of name is held to its own rule."""
    rule = _api_coverage().lacks

    def undocumented(x):
        return x

    def without_examples(x):
        """Return `x`.

        Parameters
        ----------
        x : object
            Anything.
        """
        return x

    def copied_fails(x):
        """Return `x`.

        Parameters
        ----------
        x : object
            Anything.

        Examples
        --------
        >>> from token_dynamics.attention import Softmax
        >>> copied_fails(np.zeros(2)).shape
        (2,)
        """
        return x

    class Silent(ValueError):
        pass

    assert rule("token_dynamics", "f", undocumented) == ["docstring"]
    assert rule("token_dynamics", "f", without_examples) == ["Examples"]
    assert rule("token_dynamics", "f", copied_fails) == ["import of copied_fails, np in Examples"]
    assert rule("token_dynamics", "E", Silent) == ["docstring"]
    assert rule("token_dynamics.attention", "NOT_A_CONSTANT", 1.0) == ["#: description"]
    assert rule("token_dynamics.attention", "BLOCK_ELEMENTS", 2**16) == []
