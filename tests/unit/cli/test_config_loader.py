"""The one loader of settings files (harness/core/config.py): a kind's template words each problem it has one
for, a problem without one is Python's own exception, and `true` is never a number.

    pytest -q tests/unit/cli/test_config_loader.py
"""

from __future__ import annotations

import pytest
import tomllib
import yaml

from harness.core.config import Kind, checked, load_document, unknown_keys
from harness.core.errors import UserError

WORDED = Kind(
    "toml",
    {
        "missing": "no {path}",
        "syntax": "bad {path}{at}: {error}",
        "unknown": "{where}: {unknown} (known: {known})",
        "int": "{what}: {value!r} below {low}",
    },
)
BARE = Kind("yaml", error=ValueError)


def test_a_worded_problem_is_the_kinds_error_and_an_unworded_one_pythons(tmp_path):
    with pytest.raises(UserError, match=r"^no "):
        load_document(tmp_path / "none.toml", WORDED)
    (tmp_path / "bad.toml").write_text("a = [\n")
    with pytest.raises(UserError, match=r"^bad .*bad.toml: "):
        load_document(tmp_path / "bad.toml", WORDED)
    with pytest.raises(FileNotFoundError):
        load_document(tmp_path / "none.yaml", BARE)
    (tmp_path / "bad.yaml").write_text("a: [1\n")
    with pytest.raises(yaml.YAMLError):
        load_document(tmp_path / "bad.yaml", BARE)
    (tmp_path / "empty.yaml").write_text("")
    assert load_document(tmp_path / "empty.yaml", BARE) is None
    (tmp_path / "ok.toml").write_text("a = 1\n")
    assert load_document(tmp_path / "ok.toml", WORDED) == {"a": 1}
    assert isinstance(tomllib.TOMLDecodeError(), ValueError)  # why BARE's ValueError is not asked for a parse error


def test_true_is_never_a_number_and_bounds_are_checked():
    assert checked(3, (int,), WORDED, "int", low=1, what="n") == 3
    assert checked(True, (bool,), WORDED, "int", what="flag") is True
    for bad in (True, 0, 1.5, None):
        with pytest.raises(UserError, match=r"^n: "):
            checked(bad, (int,), WORDED, "int", low=1, what="n")
    with pytest.raises(UserError, match=r"^n: nan below None"):
        checked(float("nan"), (float,), WORDED, "int", finite=True, what="n")


def test_unknown_keys_are_listed_sorted():
    unknown_keys({"a": 1}, {"a", "b"}, WORDED, where="w")
    with pytest.raises(UserError) as e:
        unknown_keys({"z": 1, "y": 2, "a": 3}, {"b", "a"}, WORDED, where="w")
    assert str(e.value) == "w: y, z (known: a, b)"
