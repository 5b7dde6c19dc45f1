"""A user's module whose own import fails (tests/unit/cli/test_bad_inputs.py: `byom_import_error:build`)."""

import not_a_real_package_for_ddlbench  # noqa: F401


def build():
    raise AssertionError("never reached")
