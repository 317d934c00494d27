"""`make test-oldest` pins every dependency at the bound pyproject.toml gives it."""

import tomllib

import pytest

from .helpers import ROOT, load_tool

oldest_requirements = load_tool("oldest_requirements")


def test_every_dependency_is_pinned_at_its_lower_bound():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    for requirements in (project["dependencies"], project["optional-dependencies"]["widgets"]):
        pins = oldest_requirements.oldest(requirements)
        assert [p.replace("==", ">=") for p in pins] == [r.replace(" ", "") for r in requirements]
    assert "matplotlib==3.8.4" in oldest_requirements.oldest(project["dependencies"])


@pytest.mark.parametrize(
    "requirement", ["numpy", "numpy>=2,<3", "numpy<3", "numpy>=2; python_version<'4'"]
)
def test_a_requirement_without_a_plain_lower_bound_is_refused(requirement):
    with pytest.raises(SystemExit, match="lower bound"):
        oldest_requirements.oldest([requirement])
