"""Schemes: how gradients are synchronised. One file per scheme, registered by name.

Every module of this package is imported here (registration is their side effect), so adding a scheme
is adding its file (docs/ARCHITECTURE.md, "How to add"). Schemes kept outside this tree are named
in DDLBENCH_SCHEME_MODULES (comma-separated module names importable on PYTHONPATH): the launcher passes
the variable to every rank, which imports them the same way.
"""

import importlib
import os
import pkgutil

from harness.core.errors import UserError
from harness.schemes.base import SCHEMES, Scheme, SchemeContext, SchemeEntry, register
from harness.schemes.knobs import Grid, Knob, Knobs, Range

__all__ = ["SCHEMES", "Grid", "Knob", "Knobs", "Range", "Scheme", "SchemeContext", "SchemeEntry", "register"]

for _module in pkgutil.iter_modules(__path__):  # a load within this layer (docs/ARCHITECTURE.md, "Plugins")
    importlib.import_module(f"{__name__}.{_module.name}")

for _name in filter(None, (x.strip() for x in os.environ.get("DDLBENCH_SCHEME_MODULES", "").split(","))):
    try:
        importlib.import_module(_name)
    except ImportError as _e:
        raise UserError(
            f"DDLBENCH_SCHEME_MODULES names {_name!r}, which cannot be imported ({_e}); "
            f"put its folder on PYTHONPATH or fix the variable"
        ) from None
