"""Workload functions that break the bring-your-own-model contract, for tests/unit/cli/test_bad_inputs.py
(imported by its Python path, `byom_bad:NAME`; pytest puts tests/ on sys.path)."""

import torch

from examples import byom_model
from workloads.base import WorkloadSpec

not_callable = 42


def not_a_spec():
    return byom_model.BagClassifier()


def raises():
    raise RuntimeError("no weights here")


def bad_batch():
    return WorkloadSpec(
        name="x",
        family="custom",
        build=byom_model.BagClassifier,
        make_batch=byom_model.make_batch,
        loss=byom_model.loss,
        batch=0,
        seq_len=8,
        sample_unit="seq",
    )


def no_params():
    return WorkloadSpec(
        name="x",
        family="custom",
        build=torch.nn.ReLU,
        make_batch=byom_model.make_batch,
        loss=byom_model.loss,
        batch=4,
        seq_len=8,
        sample_unit="seq",
    )
