"""The real frameworks, as installed by scripts/install_frameworks.sh, train losslessly on 2 CPU ranks.

    bash scripts/install_frameworks.sh all                 # once: Horovod wheel (built or cached), DeepSpeed
    pytest tests/integration/processes/test_frameworks_install.py -v -rs

Each framework test launches 2 worker processes the way users launch them (`horovodrun --gloo`, the
`deepspeed` launcher), trains a tiny MLP for a few SGD-with-momentum steps on a different shard per rank,
starting from a different random init per rank, and checks what "lossless" means in the design notes:
parameters bit-identical on every rank, and equal (fp32 tolerance) to one process training on the
concatenated global batch from rank 0's init.

A framework that does not import is skipped, with the install command in the reason. Under CI
(CI=true) with DDLBENCH_REQUIRE_FRAMEWORKS=1, a missing framework fails instead.

The installer itself is tested without installing: its arguments, the C++17 patch, and (through
--dry-run, with a CUDA torch faked by DDLBENCH_FAKE_TORCH_CUDA, a fake nvcc and a fake nvidia-nccl
package) the environment Horovod is built with: NCCL on a CUDA torch, nothing GPU-related on CPU.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from helpers import ROOT

INSTALLER = ROOT / "scripts" / "install_frameworks.sh"
HOROVOD_VERSION = "0.28.1"  # the versions the installer pins
DEEPSPEED_VERSION = "0.19.8"

# Model, data and the single-process reference: shared, as source, by the workers and this test.
COMMON = textwrap.dedent(
    """
    import torch

    STEPS = 4        # optimizer steps
    MICRO_BATCH = 4  # samples per rank per step
    LR, MOMENTUM = 0.1, 0.9


    def make_model(rank):
        # a different init per rank: equal parameters afterwards prove the framework's broadcast
        torch.manual_seed(100 + rank)
        return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))


    def global_batches(world):
        g = torch.Generator().manual_seed(0)
        return [(torch.randn(world * MICRO_BATCH, 8, generator=g), torch.randn(world * MICRO_BATCH, 4, generator=g))
                for _ in range(STEPS)]


    def shard(t, rank):
        return t[rank * MICRO_BATCH:(rank + 1) * MICRO_BATCH]


    def loss_fn(out, y):
        # mean over the local batch: averaging it over equal shards equals the mean over the global batch
        return torch.nn.functional.mse_loss(out, y)


    def reference(world):
        # one process, the concatenated global batch, rank 0's init
        model = make_model(0)
        opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
        for x, y in global_batches(world):
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
        return {n: p.detach().clone() for n, p in model.named_parameters()}
    """
)

HOROVOD_WORKER = COMMON + textwrap.dedent(
    """
    import sys
    import horovod.torch as hvd

    hvd.init()
    rank, world = hvd.rank(), hvd.size()
    model = make_model(rank)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM),
                                   named_parameters=model.named_parameters())
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    for x, y in global_batches(world):
        opt.zero_grad()
        loss_fn(model(shard(x, rank)), shard(y, rank)).backward()
        opt.step()
    params = {n: p.detach().clone() for n, p in model.named_parameters()}
    torch.save({"world": world, "params": params}, f"{sys.argv[-1]}/rank{rank}.pt")
    hvd.shutdown()
    """
)

DEEPSPEED_WORKER = COMMON + textwrap.dedent(
    """
    import sys
    import deepspeed
    import torch.distributed as dist

    deepspeed.init_distributed(dist_backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    model = make_model(rank)
    config = {
        "train_micro_batch_size_per_gpu": MICRO_BATCH,
        "gradient_accumulation_steps": 1,
        "train_batch_size": MICRO_BATCH * world,
        "zero_optimization": {"stage": 2},
        # a client torch.optim.SGD under ZeRO is "untested" for DeepSpeed, which refuses it without this
        "zero_allow_untested_optimizer": True,
        # DeepSpeed clips the global gradient norm to 1.0 unless told otherwise (GRADIENT_CLIPPING_DEFAULT):
        # the same optimizer as every other method means no clipping
        "gradient_clipping": 0.0,
    }
    engine, _, _, _ = deepspeed.initialize(
        model=model, optimizer=torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM), config=config)
    assert engine.zero_optimization_stage() == 2
    for x, y in global_batches(world):
        loss = loss_fn(engine(shard(x, rank).to(engine.device)), shard(y, rank).to(engine.device))
        engine.backward(loss)
        engine.step()
    params = {n: p.detach().cpu().clone() for n, p in engine.module.named_parameters()}
    torch.save({"world": world, "params": params}, f"{sys.argv[-1]}/rank{rank}.pt")
    # a program ends its process group itself: left to the interpreter's exit, gloo's worker threads can
    # outlive it and abort the process ("terminate called without an active exception")
    dist.barrier()
    dist.destroy_process_group()
    """
)


# ---------------------------------------------------------------------------------------------- helpers
def _must_have(what: str, how: str) -> None:
    """Skip loudly, naming the install command; fail instead where CI requires the frameworks."""
    msg = f"FRAMEWORK MISSING: {what}. Install it with: {how}"
    if os.environ.get("CI") == "true" and os.environ.get("DDLBENCH_REQUIRE_FRAMEWORKS") == "1":
        pytest.fail(f"{msg} (CI=true and DDLBENCH_REQUIRE_FRAMEWORKS=1 make this a failure)")
    print(f"\n*** {msg}", file=sys.__stderr__)
    pytest.skip(msg)


def _require_framework(name: str, import_stmt: str, launcher: str) -> Path:
    """The framework imports in a fresh interpreter (catches ABI breaks too) and its launcher exists."""
    how = f"bash scripts/install_frameworks.sh {name}"
    if importlib.util.find_spec(name) is None:
        _must_have(f"`{name}` is not installed", how)
    proc = subprocess.run([sys.executable, "-c", import_stmt], capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        _must_have(f"`{import_stmt}` fails: {last}", how)
    # the console script installed next to this interpreter, so it runs the same python; in a venv
    # that inherits the system's packages it lives beside the base interpreter, found on PATH
    exe = Path(sys.executable).parent / launcher
    if not exe.exists():
        found = shutil.which(launcher)
        if found is None:
            _must_have(f"`{launcher}` is neither next to {sys.executable} nor on PATH", how)
        exe = Path(found)
    return exe


def _extensions_dir() -> str:
    """Where the installer pre-compiled DeepSpeed's ops: the backend computes the installer's default."""
    from harness.backends.deepspeed import extensions_dir

    return extensions_dir()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(cmd: list[str], cwd: Path, timeout_s: float, env_extra: dict[str, str] | None = None) -> str:
    """Run a launcher in its own process group; on timeout kill the whole group (workers included)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", **(env_extra or {}))
    proc = subprocess.Popen(
        cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"{cmd[0]} hung for {timeout_s} s; output tail:\n{out[-4000:]}")
    assert proc.returncode == 0, f"{' '.join(cmd)} exited {proc.returncode}; output tail:\n{out[-4000:]}"
    return out


def _assert_lossless(out_dir: Path, world: int) -> None:
    ranks = [torch.load(out_dir / f"rank{r}.pt") for r in range(world)]
    assert [r["world"] for r in ranks] == [world] * world
    ref_ns: dict = {}
    exec(COMMON, ref_ns)  # our own source, shared with the workers
    with torch.random.fork_rng():  # the reference seeds torch: leave this process's RNG as it was
        expected = ref_ns["reference"](world)
        init = {n: p.detach() for n, p in ref_ns["make_model"](0).named_parameters()}
    first = ranks[0]["params"]
    assert first.keys() == expected.keys()
    for name in expected:
        for r in range(1, world):
            assert torch.equal(ranks[r]["params"][name], first[name]), f"{name}: rank {r} differs from rank 0"
        torch.testing.assert_close(first[name], expected[name], msg=lambda m, n=name: f"{n} vs single process: {m}")
        assert not torch.equal(first[name], init[name]), f"{name} never changed: no training happened"


# ---------------------------------------------------------------------------------------------- frameworks
@pytest.mark.slow
def test_horovod_gloo_two_ranks_are_identical_and_lossless(tmp_path):
    horovodrun = _require_framework("horovod", "import horovod.torch", "horovodrun")
    (tmp_path / "worker.py").write_text(HOROVOD_WORKER)
    out = tmp_path / "out"
    out.mkdir()
    _run(
        [str(horovodrun), "-np", "2", "-H", "localhost:2", "--gloo", sys.executable, "worker.py", str(out)],
        cwd=tmp_path,
        timeout_s=300,
    )
    _assert_lossless(out, world=2)


@pytest.mark.slow
def test_deepspeed_zero2_gloo_cpu_two_ranks_are_identical_and_lossless(tmp_path):
    launcher = _require_framework("deepspeed", "import deepspeed", "deepspeed")
    (tmp_path / "worker.py").write_text(DEEPSPEED_WORKER)
    out = tmp_path / "out"
    out.mkdir()
    # On CPU the deepspeed launch program takes --num_gpus as the number of local processes; it appends
    # --local_rank=N to the worker's argv (the worker reads its out dir from argv[-1]).
    # A free port, not 29500: other runs on this box may hold the default.
    # First use JIT-compiles DeepSpeed's CPU comm op (the installer pre-compiles it), hence the timeout.
    _run(
        [str(launcher), "--num_gpus", "2", "--master_port", str(_free_port()), "worker.py", str(out)],
        cwd=tmp_path,
        timeout_s=600,
        env_extra={"TORCH_EXTENSIONS_DIR": _extensions_dir()},
    )
    _assert_lossless(out, world=2)


# ---------------------------------------------------------------------------------------------- the installer
def _installer(*args: str, timeout_s: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(INSTALLER), *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=dict(os.environ, PYTHON=sys.executable),
    )


def test_installer_refuses_byteps_plainly():
    proc = _installer("byteps")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "byteps: NOT INSTALLED" in proc.stderr
    assert "CUDA and NCCL" in proc.stderr
    assert "NOT SUPPORTED" in proc.stdout  # in the summary too


def test_installer_rejects_unknown_target_and_no_target():
    for args in (("tensorflow",), ()):
        proc = _installer(*args)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert "ERROR" in proc.stderr and "horovod" in proc.stderr  # says what is known


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "import_stmt", "launcher", "version"),
    [
        ("horovod", "import horovod.torch", "horovodrun", HOROVOD_VERSION),
        ("deepspeed", "import deepspeed", "deepspeed", DEEPSPEED_VERSION),
    ],
)
def test_installer_is_idempotent_and_keeps_torch(name, import_stmt, launcher, version):
    _require_framework(name, import_stmt, launcher)
    check = _installer("--check", name)
    assert check.returncode == 0, check.stdout + check.stderr
    assert f"{name}: {version}" in check.stdout
    proc = _installer(name, timeout_s=900)  # deepspeed: may compile its comm op if the cache is new
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "already present" in proc.stdout
    assert f"torch {torch.__version__} unchanged (verified)" in proc.stdout


# ---------------------------------------------------------------------------------------------- the C++17 patch
def _patch_module():
    spec = importlib.util.spec_from_file_location("horovod_patches", ROOT / "scripts" / "horovod_patches.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_cxx17_patch_raises_the_standard_once_and_refuses_unknown_cmake(tmp_path):
    mod = _patch_module()
    (tmp_path / "horovod" / "torch").mkdir(parents=True)
    top = tmp_path / "CMakeLists.txt"
    sub = tmp_path / "horovod" / "torch" / "CMakeLists.txt"
    top.write_text("project(horovod)\nset(CMAKE_CXX_STANDARD 14)\nset(CMAKE_CXX_STANDARD_REQUIRED ON)\n")
    sub.write_text('if(NOT Pytorch_VERSION VERSION_LESS "1.5.0")\n    set(CMAKE_CXX_STANDARD 14)\nendif()\n')
    assert len(mod.patch_tree(tmp_path, gloo=False)) == 2
    assert "set(CMAKE_CXX_STANDARD 17)" in top.read_text() and "14" not in top.read_text()
    assert "set(CMAKE_CXX_STANDARD 17)" in sub.read_text() and "14)" not in sub.read_text()
    assert mod.patch_tree(tmp_path, gloo=False) == [f"{f}: already C++17" for f in mod.FILES]  # idempotent
    sub.write_text("project(other)\n")
    with pytest.raises(SystemExit, match="not the one the patch was written for"):
        mod.patch_tree(tmp_path, gloo=False)


GLOO_CONTEXT = """void GlooContext::Initialize(const std::string& gloo_iface) {
  gloo_iface_ = gloo_iface;
  attr device_attr;
  device_attr.iface = gloo_iface_;
}

void GlooContext::InitializeForProcessSet(const GlooContext& global_context,
                                          const std::vector<int>& registered_ranks) {
  attr device_attr;
  device_attr.iface = gloo_iface_;
  device_attr.ai_family = AF_UNSPEC;
}
"""


def test_process_set_patch_takes_the_global_gloo_interface_once():
    """Horovod 0.28.1 creates the process sets' gloo device from an unset interface name, so gloo takes the
    hostname's address (127.0.1.1 on Debian) and multi-node jobs fail; the patch fixes only that place."""
    mod = _patch_module()
    new, what = mod.patch_gloo_text(GLOO_CONTEXT)
    assert what == "patched"
    head, tail = new.split("InitializeForProcessSet")
    assert "global_context.gloo_iface_" not in head  # Initialize() untouched
    assert tail.index("gloo_iface_ = global_context.gloo_iface_;") < tail.index("device_attr.iface")
    assert mod.patch_gloo_text(new) == (new, "already patched")  # idempotent
    with pytest.raises(ValueError):
        mod.patch_gloo_text("void GlooContext::Initialize() {}\n")


def test_a_missing_framework_skips_loudly_but_fails_where_ci_requires_it(monkeypatch):
    how = "bash scripts/install_frameworks.sh horovod"
    monkeypatch.delenv("DDLBENCH_REQUIRE_FRAMEWORKS", raising=False)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.skip.Exception, match=r"FRAMEWORK MISSING.*install_frameworks.sh horovod"):
        _must_have("`horovod` is not installed", how)
    monkeypatch.setenv("DDLBENCH_REQUIRE_FRAMEWORKS", "1")
    with pytest.raises(pytest.fail.Exception, match="DDLBENCH_REQUIRE_FRAMEWORKS=1 make this a failure"):
        _must_have("`horovod` is not installed", how)


# ---------------------------------------------------------------------------------------------- Horovod's GPU build
def _dry_run(**env: str) -> tuple[str, list[str]]:
    """`install_frameworks.sh --dry-run horovod` with the caller's Horovod/CUDA settings removed; returns the
    whole output and the build-environment lines (VAR=value)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("HOROVOD_", "DDLBENCH_")) and k != "PYTHONPATH"}
    proc = subprocess.run(
        ["bash", str(INSTALLER), "--dry-run", "horovod"],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(clean, PYTHON=sys.executable, **env),
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "unchanged (verified)" not in out and "pip installed" not in out  # nothing installed
    build_env = [line.strip() for line in proc.stdout.splitlines() if line.startswith("    ") and "=" in line]
    assert "HOROVOD_WITH_PYTORCH=1" in build_env, out
    return out, build_env


def _wheel_cache(out: str) -> str:
    return next(line for line in out.splitlines() if "wheel cache:" in line).split("wheel cache:")[1].strip()


@pytest.mark.skipif(torch.version.cuda is not None, reason="the CPU build's environment, on a CPU torch")
def test_installer_builds_cpu_horovod_without_nccl_in_the_cpu_cache(tmp_path):
    out, build_env = _dry_run()
    assert not any(v.startswith(("HOROVOD_GPU_OPERATIONS", "HOROVOD_NCCL", "HOROVOD_CUDA")) for v in build_env), out
    assert "HOROVOD_WITH_MPI=1" in build_env
    # the cache folder of CPU wheels with this installer's patches (a wheel with fewer is rebuilt)
    py = "py{}{}".format(*sys.version_info[:2])
    cache = Path(os.path.expanduser("~/.cache/ddlbench")) / "wheels" / f"horovod-{HOROVOD_VERSION}"
    expected = cache / f"torch{torch.__version__.split('+')[0]}-{py}-cpu-mpi-gloo-p{_patch_module().PATCH_LEVEL}"
    assert _wheel_cache(out) == str(expected), out
    wheels = sorted(expected.glob(f"horovod-{HOROVOD_VERSION}-*.whl"))
    if wheels:
        assert f"cached wheel: {wheels[0]}" in out


def _fake_cuda_toolkit(root: Path, release: str) -> Path:
    """A CUDA toolkit with an nvcc that answers --version and --dryrun as NVIDIA's does."""
    (root / "bin").mkdir(parents=True)
    nvcc = root / "bin" / "nvcc"
    nvcc.write_text(
        textwrap.dedent(f"""\
        #!/bin/sh
        case "$*" in
            *--dryrun*) echo "#\\$ _HERE_=$(dirname "$0")" >&2 ;;
            *--version*) echo "Cuda compilation tools, release {release}, V{release}.99" ;;
        esac
        """)
    )
    nvcc.chmod(0o755)
    return root


def _fake_nccl_package(site: Path) -> Path:
    """torch's nvidia-nccl package layout: nvidia/nccl/{include/nccl.h, lib/libnccl.so.2} (no libnccl.so)."""
    pkg = site / "nvidia" / "nccl"
    (pkg / "include").mkdir(parents=True)
    (pkg / "lib").mkdir()
    (pkg / "include" / "nccl.h").write_text("#define NCCL_MAJOR 2\n")
    (pkg / "lib" / "libnccl.so.2").write_bytes(b"")
    return pkg


def test_installer_builds_horovod_with_nccl_for_a_cuda_torch(tmp_path):
    cuda = _fake_cuda_toolkit(tmp_path / "cuda-12.4", "12.4")
    nccl = _fake_nccl_package(tmp_path / "site")
    out, build_env = _dry_run(
        DDLBENCH_FAKE_TORCH_CUDA="12.4",
        HOROVOD_CUDA_HOME=str(cuda),
        PYTHONPATH=str(tmp_path / "site"),
        DDLBENCH_CACHE=str(tmp_path / "cache"),
    )
    assert "HOROVOD_GPU_OPERATIONS=NCCL" in build_env, out
    assert "HOROVOD_NCCL_LINK=SHARED" in build_env
    assert f"HOROVOD_CUDA_HOME={cuda}" in build_env
    assert f"HOROVOD_NCCL_HOME={nccl}" in build_env and f"HOROVOD_NCCL_INCLUDE={nccl}/include" in build_env
    assert any(v.startswith("HOROVOD_NCCL_LIB=") for v in build_env)
    assert "nvcc not found" not in out and "WARNING" not in out
    # its own cache folder: a CPU wheel is never taken for a CUDA box
    assert _wheel_cache(out).endswith(f"-cu124-nccl-mpi-gloo-p{_patch_module().PATCH_LEVEL}"), out
    assert "cached wheel: none" in out


def test_installer_says_in_one_line_how_to_get_nvcc(tmp_path):
    empty = tmp_path / "no-cuda"
    empty.mkdir()
    out, build_env = _dry_run(
        DDLBENCH_FAKE_TORCH_CUDA="12.4", HOROVOD_CUDA_HOME=str(empty), DDLBENCH_CACHE=str(tmp_path / "cache")
    )
    assert "HOROVOD_GPU_OPERATIONS=NCCL" in build_env
    problem = [line for line in out.splitlines() if "nvcc not found" in line]
    assert len(problem) == 1 and "cuda-toolkit-12-4" in problem[0] and "HOROVOD_CUDA_HOME" in problem[0], out


def test_installer_fakes_cuda_only_in_a_dry_run():
    proc = subprocess.run(
        ["bash", str(INSTALLER), "horovod"],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, PYTHON=sys.executable, DDLBENCH_FAKE_TORCH_CUDA="12.4"),
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "only with --dry-run" in proc.stderr
