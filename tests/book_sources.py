"""The book's source scanner (`book/_ext/traceability.py`), importable by the tests."""

import importlib.util
import sys

from .helpers import ROOT

_spec = importlib.util.spec_from_file_location("traceability", ROOT / "book/_ext/traceability.py")
traceability = importlib.util.module_from_spec(_spec)
sys.modules["traceability"] = traceability  # dataclasses look their module up there
_spec.loader.exec_module(traceability)
