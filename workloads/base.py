"""The workload contract: a name, a model builder, a synthetic batch maker and the study's defaults.

A workload is a registered name (`bert-base-tiny`) or, to bring your own model, a Python path
`package.module:function` naming a function that takes no arguments and returns a `WorkloadSpec`
(examples/byom_model.py is one). Either way `WORKLOADS.get(name)` gives the spec, so every command and
every rank takes both (docs/ARCHITECTURE.md, "Workload").
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch.utils.flop_counter import FlopCounterMode

from harness.core.errors import UserError
from harness.core.registry import Registry


@dataclass(frozen=True)
class WorkloadSpec:
    name: str
    """Registered name, e.g. `bert-base` or `bert-base-tiny`."""
    family: str
    """Model family: resnet | bert | gpt2 | densenet | inception | vgg."""
    build: Callable[[], torch.nn.Module]
    """Builds the model with random init (seeded by the caller); must also work under
    `with torch.device("meta")` (the profiler counts FLOPs on a meta copy)."""
    make_batch: Callable[..., dict]
    """(batch, seq_len, device, seed) -> dict of tensors made once on the device, incl. labels."""
    loss: Callable[[torch.nn.Module, dict], torch.Tensor]
    """(model, batch) -> scalar loss, mean over the batch (so averaged gradients equal the global batch's)."""
    batch: int
    """Default per-worker batch (the study's: Shi et al., IEEE Network 2021, section "Experimental settings")."""
    seq_len: int | None
    """Default sequence length; None for images."""
    sample_unit: str
    """What one sample is: `img` or `seq`."""
    description: str = ""
    """One line for `ddlbench list`."""
    per_sample_norm: bool = True
    """False when the model normalises over the batch (BatchNorm): data parallelism then equals
    per-shard, not concatenated-batch, single-process training (see tests/integration/processes/test_lossless.py)."""
    config: dict = field(default_factory=dict)
    """The architecture knobs, recorded with results."""


def is_python_path(name: str) -> bool:
    """A workload named by a Python path (`pkg.module:function`) rather than a registered name."""
    return isinstance(name, str) and ":" in name


class WorkloadRegistry(Registry[WorkloadSpec]):
    """Registered workloads, and Python paths to a user's own (bring your own model)."""

    def get(self, name: str) -> WorkloadSpec:
        if is_python_path(name):
            return load_python_path(name)
        if not super().__contains__(name):
            raise UserError(
                f"unknown workload {name!r}: known workloads are {', '.join(self)}, or your own "
                f"as a Python path package.module:function (see `ddlbench list`, {_HOW})"
            )
        return super().get(name)

    def __contains__(self, name: str) -> bool:
        return is_python_path(name) or super().__contains__(name)


WORKLOADS = WorkloadRegistry("workload")

_HOW = "see examples/byom_model.py"


@functools.cache  # errors are not cached: a fixed module is imported again on the next call
def load_python_path(path: str) -> WorkloadSpec:
    """The WorkloadSpec returned by the function at `path` (`pkg.module:function`), named `path`, its
    contract checked (UserError: what, why, how to fix)."""
    module_name, _, attr = path.partition(":")
    parts = module_name.split(".") + attr.split(".")
    if not module_name or not attr or not all(p.isidentifier() for p in parts):
        raise UserError(
            f"workload {path!r} is neither a registered name nor a Python path: write "
            f"package.module:function (e.g. examples.byom_model:build; {_HOW})"
        )
    target = _import(module_name, path)
    for name in attr.split("."):
        if not hasattr(target, name):
            raise UserError(
                f"workload {path!r}: module {module_name!r} has no {attr!r}; fix the name after the colon ({_HOW})"
            )
        target = getattr(target, name)
    if not callable(target):
        raise UserError(
            f"workload {path!r}: {attr!r} is a {type(target).__name__}, not a function; name a "
            f"function that returns a WorkloadSpec ({_HOW})"
        )
    try:
        spec = target()
    except Exception as e:  # the user's own code: any failure is theirs to fix, said in one line
        raise UserError(
            f"workload {path!r}: {attr}() raised {type(e).__name__}: {_first_line(e)}; fix it ({_HOW})"
        ) from None
    return dataclasses.replace(check_contract(spec, path), name=path)


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [""])[0]


def _import(module_name: str, path: str):
    """Import `module_name`; when it is not found, from the working directory too, as `python -m` would.
    A folder found that way goes on PYTHONPATH, so ranks (which run `python -P`, without the working
    directory on sys.path; docs/ARCHITECTURE.md, "Launching") import the same module."""
    cwd = os.getcwd()
    module = _import_once(module_name, path, last=cwd in sys.path)
    if module is None:
        sys.path.append(cwd)
        importlib.invalidate_caches()
        module = _import_once(module_name, path, last=True)
    top = sys.modules[module_name.split(".")[0]]
    # the folder it was found in: a package's folder's parent, a module file's folder
    found = next(iter(top.__path__)) if hasattr(top, "__path__") else getattr(top, "__file__", None)
    if found and Path(found).resolve().parent == Path(cwd).resolve():  # through '' or `python -m`'s cwd
        _export(cwd)
    return module


def _import_once(module_name: str, path: str, last: bool):
    """The module, or None when its top-level package is not found and another try is left."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name and module_name.startswith(e.name):
            if not last and e.name == module_name.split(".")[0]:
                return None
            raise UserError(
                f"workload {path!r}: no module named {e.name!r} on sys.path or in {os.getcwd()}; "
                f"put its folder on PYTHONPATH or run from the folder holding it"
            ) from None
        raise UserError(
            f"workload {path!r}: importing {module_name} failed: {_first_line(e)}; install what it needs"
        ) from None
    except Exception as e:  # a syntax error or a failing import inside the user's module
        raise UserError(
            f"workload {path!r}: importing {module_name} failed: {type(e).__name__}: {_first_line(e)}; fix the module"
        ) from None


def _export(folder: str) -> None:
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if folder not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([*paths, folder])


def check_contract(spec, path: str) -> WorkloadSpec:
    """The fields a WorkloadSpec must have, checked before any process starts; the model itself is built
    on the meta device (its contract: build() works there), which costs no memory."""

    def bad(what: str) -> UserError:
        return UserError(f"workload {path!r} breaks the WorkloadSpec contract: {what} ({_HOW})")

    if not isinstance(spec, WorkloadSpec):
        raise bad(f"the function returned a {type(spec).__name__}, not a workloads.base.WorkloadSpec")
    for name in ("build", "make_batch", "loss"):
        if not callable(getattr(spec, name)):
            raise bad(f"{name} must be a function")
    if not isinstance(spec.batch, int) or isinstance(spec.batch, bool) or spec.batch < 1:
        raise bad(f"batch must be an integer >= 1, got {spec.batch!r}")
    if spec.seq_len is not None and (not isinstance(spec.seq_len, int) or spec.seq_len < 1):
        raise bad(f"seq_len must be None (images) or an integer >= 1, got {spec.seq_len!r}")
    if not isinstance(spec.sample_unit, str) or not spec.sample_unit:
        raise bad(f"sample_unit must name a sample (img, seq), got {spec.sample_unit!r}")
    try:
        with torch.device("meta"):
            model = spec.build()
    except Exception as e:  # the user's model code
        raise bad(f"build() under torch.device('meta') raised {type(e).__name__}: {_first_line(e)}") from None
    if not isinstance(model, torch.nn.Module) or count_params(model) == 0:
        raise bad("build() must return a torch.nn.Module with trainable parameters")
    return spec


def register(spec: WorkloadSpec) -> WorkloadSpec:
    return WORKLOADS.register(spec.name, spec)


def count_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def grad_bytes(model: torch.nn.Module) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)


def flops_per_sample(spec: WorkloadSpec, model: torch.nn.Module, seq_len: int | None, device) -> float:
    """Forward + backward FLOPs of one sample, counted by torch.utils.flop_counter on a batch of 2
    (divided by 2: a batch of 1 trips some models' squeeze paths)."""
    batch = spec.make_batch(2, seq_len=seq_len, device=device, seed=12345)
    counter = FlopCounterMode(display=False)
    with counter:
        spec.loss(model, batch).backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops() / 2.0
