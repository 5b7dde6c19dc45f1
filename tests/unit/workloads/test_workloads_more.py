"""The image workloads written in plain torch.nn (DenseNet-201, Inception-v4, VGG-16) and their -tiny
variants: published parameter counts, a CPU forward + backward, seeded init, FLOPs counted, `ddlbench list`.

    pytest tests/unit/workloads/test_workloads_more.py -v

The full models are built (VGG-16: 138M parameters, about 550 MB in fp32) but never run: a full-size
forward on CPU takes seconds to minutes.
"""

from __future__ import annotations

import time

import pytest
import torch
from click.testing import CliRunner

from harness.cli.main import cli
from workloads import WORKLOADS
from workloads.base import count_params, flops_per_sample

# Published parameter counts with 1000 classes (trainable parameters, BatchNorm affine included):
PUBLISHED = {
    "densenet201": 20_013_928,  # torchvision densenet201 (Huang et al., CVPR 2017: "20.0M")
    "inception-v4": 42_679_816,  # Cadene's pretrainedmodels inceptionv4, as timm (Szegedy et al. 2017)
    "vgg16": 138_357_544,  # torchvision vgg16 (Simonyan & Zisserman 2015, configuration D: "138M")
}
TINY = [f"{name}-tiny" for name in PUBLISHED]


@pytest.mark.parametrize("name", list(PUBLISHED))
def test_full_models_have_the_published_parameter_count(name):
    spec = WORKLOADS.get(name)
    assert (spec.batch, spec.seq_len, spec.sample_unit) == (64, None, "img")
    torch.manual_seed(0)
    model = spec.build()
    n = count_params(model)
    del model
    assert abs(n - PUBLISHED[name]) <= 0.005 * PUBLISHED[name], f"{name}: {n:,} vs {PUBLISHED[name]:,}"


def test_full_models_take_their_papers_image_size():
    sizes = {name: tuple(WORKLOADS.get(name).make_batch(1)["pixel_values"].shape) for name in PUBLISHED}
    assert sizes == {"densenet201": (1, 3, 224, 224), "inception-v4": (1, 3, 299, 299), "vgg16": (1, 3, 224, 224)}


@pytest.mark.parametrize("name", TINY)
def test_tiny_variant_trains_on_cpu_in_well_under_a_second(name):
    spec = WORKLOADS.get(name)
    torch.manual_seed(0)
    model = spec.build()
    model.train()
    batch = spec.make_batch(spec.batch, device="cpu", seed=0)
    assert batch["pixel_values"].shape[0] == spec.batch
    # one thread, as a CPU worker runs (one per core): on a shared box more threads than free cores make
    # OpenMP spin and time the neighbours, not the model; best of three after a warm-up pass
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        times = []
        for _ in range(4):
            model.zero_grad(set_to_none=True)
            t0 = time.perf_counter()
            loss = spec.loss(model, batch)
            loss.backward()
            times.append(time.perf_counter() - t0)
    finally:
        torch.set_num_threads(threads)
    elapsed = min(times[1:])
    assert loss.ndim == 0 and torch.isfinite(loss)
    # a fresh classifier on random labels starts near ln(classes)
    classes = spec.config["num_labels"]
    assert abs(loss.item() - torch.log(torch.tensor(float(classes))).item()) < 1.5
    params = [p for p in model.parameters() if p.requires_grad]
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in params)
    assert all(p.grad.abs().sum() > 0 for p in params), "a parameter got no gradient"
    assert elapsed < 1.0, f"{name}: forward + backward took {elapsed:.2f} s at batch {spec.batch}"


@pytest.mark.parametrize("name", TINY)
def test_init_is_deterministic_under_a_seed(name):
    spec = WORKLOADS.get(name)

    def state(seed):
        torch.manual_seed(seed)
        return spec.build().state_dict()

    a, b, c = state(7), state(7), state(8)
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert any(not torch.equal(a[k], c[k]) for k in a if a[k].is_floating_point())
    x, y = spec.make_batch(4, seed=3), spec.make_batch(4, seed=3)
    assert all(torch.equal(x[k], y[k]) for k in x)


@pytest.mark.parametrize("name", TINY)
def test_flops_are_counted_on_a_meta_copy_and_on_cpu(name):
    """The worker counts FLOPs per sample with torch.utils.flop_counter; the profiler on a meta copy."""
    from harness.predict.profiler import counted_profile

    spec = WORKLOADS.get(name)
    torch.manual_seed(0)
    model = spec.build()
    per_sample = flops_per_sample(spec, model, None, "cpu")
    assert per_sample > 1e6
    table = counted_profile(name, batch=2)
    assert table["numel"].sum() == count_params(model)
    assert table["flops"].sum() / 2 == pytest.approx(per_sample, rel=1e-6)


def test_list_shows_the_new_workloads():
    res = CliRunner().invoke(cli, ["list"], catch_exceptions=False)
    assert res.exit_code == 0
    lines = {line.split()[0]: line for line in res.output.splitlines() if line.startswith("  ") and line.split()}
    for name in [*PUBLISHED, *TINY]:
        assert name in lines, f"{name} missing from `ddlbench list`"
        assert "unit img" in lines[name]
    for name in PUBLISHED:
        assert "batch 64," in lines[name]
