"""Bad input across every command, as a new user types it: exit status 2, exactly one line on stderr
("error: what, why; how to fix"), no traceback, and no process started (each is refused before any).

    pytest -q tests/unit/cli/test_bad_inputs.py        # ~20 s, no worker process starts

Each case is (command line, words the error line must hold). `{t}` in a command line is the fixture
directory: `garbage.parquet`, `truncated.parquet` (a real table cut in half), `notes.txt`, `run/` (a
small valid run), `badrun/` and `truncrun/` (runs whose summary is garbage or cut short), `badpart/` (a
run with a damaged cell part), `foreignrun/` (a summary lacking the columns every reader needs), `cbrun/` (a
commbench-only run), `binary.yaml`, `readonly/` (a directory nobody may write), and the sweep
files of SWEEPS below.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from harness.cli.main import cli

RUN = "run --workload bert-base-tiny --output {t}/new"
RES = "run --workload resnet50-tiny --output {t}/new"
PRED = "predict --workload bert-base --device-preset study-gpu"

SWEEPS = {  # file name -> body (each expands to at most the baseline and one 1-worker cell if accepted)
    "timeout_abc": "workloads: [resnet50-tiny]\ntimeout_s: abc\n",
    "timeout_nan": "workloads: [resnet50-tiny]\ntimeout_s: .nan\n",
    "timeout_bool": "workloads: [resnet50-tiny]\ntimeout_s: true\n",
    "knobs_int": "workloads: [resnet50-tiny]\nknobs: {ddp: 5}\n",
    "knobs_list": "workloads: [resnet50-tiny]\nknobs: [ddp]\n",
    "knob_negative": "workloads: [resnet50-tiny]\nworkers: [1]\nknobs: {ddp: {bucket_cap_mb: -1}}\n",
    "knob_unknown_scheme": "workloads: [resnet50-tiny]\nknobs: {nope: {x: 1}}\n",
    "workers_empty": "workloads: [resnet50-tiny]\nworkers: []\n",
    "workers_zero": "workloads: [resnet50-tiny]\nworkers: [0]\n",
    "network_misspelt": "workloads: [resnet50-tiny]\nnetwork: ib-rmda\nlabels: [eth-10g]\n",
    "labels_empty": "workloads: [resnet50-tiny]\nlabels: []\n",
    "workers_word": "workloads: [resnet50-tiny]\nworkers: [two]\n",
    "workers_float": "workloads: [resnet50-tiny]\nworkers: [1.5]\n",
    "workers_huge": "workloads: [resnet50-tiny]\nworkers: [100000]\n",
    "workloads_empty": "workloads: []\n",
    "name_dotdot": "name: ../../evil\nworkloads: [resnet50-tiny]\n",
    "name_slash": "name: a/b\nworkloads: [resnet50-tiny]\n",
    "name_number": "name: 5\nworkloads: [resnet50-tiny]\n",
    "warmup_negative": "workloads: [resnet50-tiny]\nwarmup: -1\n",
    "iters_word": "workloads: [resnet50-tiny]\niters: ten\n",
    "seq_too_long": "workloads: [bert-base-tiny]\nseq_len: 100000\n",
    "batch_zero": "workloads: [resnet50-tiny]\nbatch: 0\n",
    "baseline_word": "workloads: [resnet50-tiny]\nbaseline: maybe\n",
    "device_tpu": "workloads: [resnet50-tiny]\ndevice: tpu\n",
    "scheme_unknown": "workloads: [resnet50-tiny]\nschemes: [nope]\n",
    "unknown_key": "workloads: [resnet50-tiny]\nshemes: [ddp]\n",
    "not_yaml": "workloads: [resnet50-tiny\n",
    "a_list": "- resnet50-tiny\n",
    "ok": "name: ok\nworkloads: [resnet50-tiny]\nworkers: [1]\n",
    "byom_missing": "workloads: [no_such_pkg_xyz.models:build]\nworkers: [1]\n",
    "empty": "",
    "scheme_nowhere": "workloads: [resnet50-tiny]\nschemes: [ddp]\nbackends: [horovod]\n",
    "servers_huge": "workloads: [resnet50-tiny]\nschemes: [bsp-ps]\nworkers: [1]\nservers: [100000]\n",
    "servers_zero": "workloads: [resnet50-tiny]\nschemes: [bsp-ps]\nworkers: [1]\nservers: [0]\n",
    "dtype_fp16": "workloads: [resnet50-tiny]\nworkers: [1]\ndtype: [fp32, fp16]\n",
    "dtype_empty": "workloads: [resnet50-tiny]\ndtype: []\n",
    "dtype_number": "workloads: [resnet50-tiny]\ndtype: [32]\n",
    "precision_list": "workloads: [resnet50-tiny]\nworkers: [1]\nprecision: [0.02, 0.05]\n",
    "precision_word": "workloads: [resnet50-tiny]\nworkers: [1]\nprecision: abc\n",
    "precision_zero": "workloads: [resnet50-tiny]\nworkers: [1]\nprecision: 0\n",
    "max_iters_alone": "workloads: [resnet50-tiny]\nworkers: [1]\nmax_iters: 50\n",
}

CASES = [
    # run: knobs
    (RUN + " --knob bucket_cap_mb=[1,", ["--knob value '[1,' cannot be read"]),
    (RUN + " --knob x=!!python/object/apply:os.system", ["cannot be read", "tag"]),
    (RUN + " --knob =5", ["is not NAME=VALUE"]),
    (RUN + " --knob bucket_cap_mb", ["is not NAME=VALUE"]),
    (RUN + " --knob bucket_cap_mb=-1", ["bucket_cap_mb", "-1"]),
    (RUN + " --knob bucket_cap_mb=abc", ["bucket_cap_mb", "abc"]),
    (RUN + " --knob bucket_cap_mb=.nan", ["bucket_cap_mb"]),
    (RUN + " --knob bucket_cap_mb=.inf", ["bucket_cap_mb", "finite"]),
    (RUN + " --knob nope=1", ["unknown knob(s) nope", "bucket_cap_mb"]),
    # run: shapes, limits, placement
    (RUN + " --seq-len 600", ["from 1 to 512", "600"]),
    (RUN + " --seq-len 0", ["sequence length", "got 0"]),
    (RUN + " --seq-len -5", ["sequence length", "got -5"]),
    ("run --workload gpt2-small-tiny --seq-len 2000 --output {t}/new", ["from 1 to 1024"]),
    (RES + " --seq-len 64", ["takes images", "drop --seq-len"]),
    (RUN + " --timeout nan", ["finite number of seconds", "nan"]),
    (RUN + " --timeout inf", ["finite number of seconds", "inf"]),
    (RUN + " --timeout 0", ["timeout"]),
    (RUN + " --timeout -1", ["timeout"]),
    (RUN + " --workers 100000", ["100000 workers", "--oversubscribe"]),
    (RUN + " --workers 1 --threads 100000", ["cores", "--oversubscribe"]),
    (RUN + " --workers 0", ["workers must be an integer >= 1"]),
    (
        "run --workload bert-base-tiny --scheme bsp-ps --workers 1 --servers 100000 --output {t}/new",
        ["100000 parameter servers", "--oversubscribe"],
    ),
    (RUN + " --network ''", ["network label '' is empty"]),
    # a misspelt profile is refused, never a silent label (issue 24)
    (RUN + " --network ib-rmda", ["unknown network 'ib-rmda'", "ib-rdma", "loopback", "labels:"]),
    # click's own usage errors, one line too
    (RUN + " --workers abc", ["Invalid value for '--workers'", "run --help`"]),
    ("run --output {t}/new", ["Missing option '--workload'", "run --help`"]),
    ("report", ["Missing argument", "report --help`"]),
    ("no-such-command", ["No such command", "--help`"]),
    (RUN + " --no-such-option", ["No such option", "run --help`"]),
    (RUN + " --batch 0", ["batch must be an integer >= 1"]),
    (RUN + " --batch -1", ["batch must be an integer >= 1"]),
    (RUN + " --warmup -1", ["warmup must be an integer >= 0"]),
    (RUN + " --iters 0", ["iters must be an integer >= 1"]),
    (RUN + " --device tpu", ["unknown device 'tpu'"]),
    (RUN + " --servers 2", ["has no parameter servers"]),
    (RUN + " --scheme nope", ["unknown scheme 'nope'"]),
    (RUN + " --backend nope", ["unknown backend 'nope'"]),
    (RUN + " --scheme zero1", ["does not run on backend 'torch'"]),
    # run: compute dtype (fp32 or bf16)
    (RUN + " --dtype fp16", ["unknown dtype 'fp16'", "fp32 or bf16", "loss scaling"]),
    (RUN + " --dtype float32", ["unknown dtype 'float32'", "--dtype"]),
    (RUN + " --dtype ''", ["unknown dtype ''"]),
    # run: where results go
    ("run --workload bert-base-tiny --output {t}/notes.txt", ["is a file, not a directory"]),
    ("run --workload bert-base-tiny --output {t}/notes.txt/x", ["which is a file"]),
    ("run --workload bert-base-tiny --output {t}/readonly/r", ["cannot write in", "readonly"]),
    ("run --workload bert-base-tiny --output {t}/run", ["already holds a run", "--resume", "--overwrite"]),
    ("run --workload bert-base-tiny --output {t}/run --resume --overwrite", ["exclude each other"]),
    # sweep files
    ("sweep {t}/timeout_abc.yaml --output {t}/new", ["timeout_s: 'abc'", "number of seconds"]),
    ("sweep {t}/timeout_nan.yaml --output {t}/new", ["finite number of seconds"]),
    ("sweep {t}/timeout_bool.yaml --output {t}/new", ["timeout_s: True"]),
    ("sweep {t}/knobs_int.yaml --output {t}/new", ["knobs: {ddp: 5}", "{knob: value}"]),
    ("sweep {t}/knobs_list.yaml --output {t}/new", ["knobs", "mapping"]),
    ("sweep {t}/knob_negative.yaml --output {t}/new", ["bucket_cap_mb", "-1"]),
    ("sweep {t}/knob_unknown_scheme.yaml --output {t}/new", ["unknown scheme 'nope'"]),
    ("sweep {t}/workers_empty.yaml --output {t}/new", ["`workers:`", "is empty"]),
    ("sweep {t}/workers_zero.yaml --output {t}/new", ["workers must be integers >= 1"]),
    ("sweep {t}/network_misspelt.yaml --output {t}/new", ["unknown network 'ib-rmda'", "ib-rdma"]),
    ("sweep {t}/labels_empty.yaml --output {t}/new", ["`labels:`", "is empty"]),
    ("sweep {t}/workers_word.yaml --output {t}/new", ["`workers:`", "'two'"]),
    ("sweep {t}/workers_float.yaml --output {t}/new", ["`workers:`", "1.5"]),
    ("sweep {t}/workers_huge.yaml --output {t}/new", ["100000 workers", "oversubscribe: true"]),
    ("sweep {t}/workloads_empty.yaml --output {t}/new", ["`workloads:`", "is empty"]),
    ("sweep {t}/name_dotdot.yaml", ["sweep name '../../evil' is not allowed"]),
    ("sweep {t}/name_slash.yaml", ["sweep name 'a/b' is not allowed"]),
    ("sweep {t}/name_number.yaml", ["name: 5"]),
    ("sweep {t}/warmup_negative.yaml --output {t}/new", ["warmup must be an integer >= 0"]),
    ("sweep {t}/iters_word.yaml --output {t}/new", ["iters: 'ten'"]),
    ("sweep {t}/seq_too_long.yaml --output {t}/new", ["from 1 to 512"]),
    ("sweep {t}/batch_zero.yaml --output {t}/new", ["batch must be an integer >= 1"]),
    ("sweep {t}/baseline_word.yaml --output {t}/new", ["baseline: 'maybe'", "true or false"]),
    ("sweep {t}/device_tpu.yaml --output {t}/new", ["unknown device 'tpu'"]),
    ("sweep {t}/scheme_unknown.yaml --output {t}/new", ["unknown scheme 'nope'"]),
    ("sweep {t}/unknown_key.yaml --output {t}/new", ["unknown key(s) shemes"]),
    ("sweep {t}/not_yaml.yaml --output {t}/new", ["not valid YAML"]),
    ("sweep {t}/a_list.yaml --output {t}/new", ["must be a mapping"]),
    ("sweep {t}/garbage.parquet --output {t}/new", ["must be a mapping of settings"]),
    ("sweep {t}/binary.yaml --output {t}/new", ["cannot read sweep file", "text (YAML) file"]),
    ("sweep {t} --output {t}/new", ["is not a file"]),
    ("sweep {t}/missing.yaml --output {t}/new", ["does not exist"]),
    ("sweep {t}/ok.yaml --retry-failed", ["--retry-failed", "--resume"]),
    ("sweep {t}/empty.yaml --output {t}/new", ["is empty", "workloads:"]),
    ("sweep {t}/scheme_nowhere.yaml --output {t}/new", ["scheme 'ddp' runs on none of the sweep's backends"]),
    ("sweep {t}/servers_huge.yaml --output {t}/new", ["100000 parameter servers"]),
    ("sweep {t}/dtype_fp16.yaml --output {t}/new", ["unknown dtype 'fp16'", "`dtype:`"]),
    # the stop rule (README, "Measuring")
    (RES + " --precision 0", ["--precision '0'", "outside (0, 100%]"]),
    (RES + " --precision -0.02", ["--precision '-0.02'", "outside (0, 100%]"]),
    (RES + " --precision 150%", ["--precision '150%'", "outside (0, 100%]"]),
    (RES + " --precision 2", ["--precision '2'", "outside (0, 100%]", "2%"]),
    (RES + " --precision abc", ["--precision 'abc' is not a number", "2%"]),
    (RES + " --precision nan", ["--precision 'nan'", "outside"]),
    (RES + " --min-iters 20", ["min_iters bounds the stop rule", "--precision"]),
    (RES + " --precision 2% --min-iters 0", ["min_iters must be an integer >= 1"]),
    (RES + " --precision 2% --min-iters 50 --max-iters 20", ["max_iters 20 is below min_iters 50"]),
    (RES + " --precision 2% --max-time 900", ["max_time_s", "below the cell's timeout (600 s)"]),
    ("sweep {t}/precision_list.yaml --output {t}/new", ["is not an axis", "precision: 2%"]),
    ("sweep {t}/precision_word.yaml --output {t}/new", ["`precision:` in", "'abc' is not a number"]),
    ("sweep {t}/precision_zero.yaml --output {t}/new", ["`precision:` in", "outside (0, 100%]"]),
    ("sweep {t}/max_iters_alone.yaml --output {t}/new", ["max_iters bounds the stop rule"]),
    ("sweep {t}/ok.yaml --output {t}/new --precision 0%", ["--precision '0%'", "outside"]),
    ("sweep {t}/dtype_empty.yaml --output {t}/new", ["`dtype:`", "is empty"]),
    ("sweep {t}/dtype_number.yaml --output {t}/new", ["`dtype:`", "fp32 and/or bf16", "got 32"]),
    ("sweep {t}/servers_huge.yaml --dtype fp16 --output {t}/new", ["unknown dtype 'fp16'"]),
    ("sweep {t}/ok.yaml --resume", ["--resume needs --output"]),
    ("sweep {t}/ok.yaml --output {t}/run", ["already holds a run", "--resume"]),
    ("sweep {t}/ok.yaml --output {t}/notes.txt", ["is a file, not a directory"]),
    ("sweep {t}/ok.yaml --output {t}/readonly/r", ["cannot write in"]),
    # damaged tables
    ("show {t}/badrun", ["cannot read table", "summary.parquet", "make it again with the command that wrote it"]),
    ("show {t}/truncrun", ["cannot read table", "summary.parquet"]),
    ("show {t}/run --csv {t}/run", ["--csv", "is a directory"]),
    ("show {t}/run --csv {t}/notes.txt/x.csv", ["which is a file"]),
    ("show {t}/run --csv {t}/readonly/x.csv", ["cannot write there"]),
    ("show {t}/nope", ["no run at"]),
    ("report {t}/garbage.parquet -o {t}/rep", ["cannot read table", "garbage.parquet"]),
    ("report {t}/truncated.parquet -o {t}/rep", ["cannot read table", "truncated.parquet"]),
    ("report {t}/badrun -o {t}/rep", ["cannot read table"]),
    ("report {t}/notes.txt -o {t}/rep", ["not .parquet"]),
    ("report {t}/foreignrun -o {t}/rep", ["is not a ddlbench summary table", "no workload"]),
    ("show {t}/foreignrun", ["is not a ddlbench summary table"]),
    ("show {t}/cbrun", ["holds no cells, only a commbench table"]),
    ("predict --profile {t}/whole.parquet", ["is not a profile table"]),
    (PRED + " --commbench {t}/whole.parquet", ["is not a commbench table"]),
    (PRED + " --validate {t}/cbrun", ["holds no measured cells"]),
    ("commbench --servers 100000 --collective pushpull --output {t}/cb", ["100000 parameter servers"]),
    ("report {t}/run -o {t}/notes.txt", ["is a file, not a directory"]),
    ("report {t}/run -o {t}/readonly/rep", ["cannot write in"]),
    ("compare {t}/badrun {t}/run", ["cannot read table"]),
    ("compare {t}/run {t}/nope", ["neither a run directory nor a stored baseline"]),
    ("baseline save b1 {t}/badrun --dir {t}/bl", ["cannot read table"]),
    ("baseline save ../b1 {t}/run --dir {t}/bl", ["baseline name '../b1' is not allowed"]),
    ("baseline save b1 {t}/run --dir {t}/notes.txt", ["is a file, not a directory"]),
    ("baseline save b1 {t}/run --dir {t}/readonly/bl", ["cannot write in"]),
    # predict: every input checked before any work
    ("predict --profile {t}/garbage.parquet", ["cannot read table", "ddlbench profile"]),
    (PRED + " --dtype bf16", ["fp32 cells only", "ddlbench run --dtype bf16"]),
    ("predict --profile {t}/truncated.parquet", ["cannot read table"]),
    ("predict --profile {t}/missing.parquet", ["does not exist", "ddlbench profile"]),
    ("predict --workload bert-base --knob ddp.x=[1,", ["cannot be read"]),
    (PRED + " --knob ddp.bucket_cap_mb=abc", ["bucket_cap_mb", "abc"]),
    (PRED + " --knob ddp.bucket_cap_mb=-1", ["bucket_cap_mb", "-1"]),
    (PRED + " --knob ddp.bucket_cap_mb", ["is not METHOD.NAME=VALUE"]),
    (PRED + " --knob nope.x=1", ["nope"]),
    (PRED + " --knob ddp.nope=1", ["unknown knob", "nope"]),
    (
        "predict --workload bert-base --workload gpt2-small --device-preset study-gpu",
        ["no measured throughput for 'gpt2-small'", "--throughput"],
    ),
    ("predict --workload nope --device-preset study-gpu", ["unknown workload 'nope'"]),
    (PRED + " --link nope", ["unknown network preset 'nope'"]),
    (PRED + " --link study-ib-100g", ["--cluster study-ib-100g predicts that whole cluster"]),
    (PRED + " --network ib-100g", ["predict has no --network", "--link ib-100g", "--cluster ib-100g"]),
    (PRED + " --cluster nope.toml", ["cluster file nope.toml does not exist"]),
    (PRED + " --cluster nope", ["unknown cluster 'nope'", "study-ib-100g"]),
    (PRED + " --intra nope", ["unknown network preset 'nope'"]),
    (PRED + " --nodes 0", ["--nodes must be integers >= 1"]),
    (PRED + " --nodes abc", ["--nodes must be comma-separated integers"]),
    (PRED + " --gpus-per-node 0", ["--gpus-per-node must be integers >= 1"]),
    (PRED + " --throughput nan", ["--throughput must be a finite number > 0"]),
    (PRED + " --throughput -5", ["--throughput must be a finite number > 0"]),
    (PRED + " --batch 0", ["--batch must be a finite number > 0"]),
    # --servers: one meaning and one default everywhere; 0 is refused everywhere (README, "Parameter servers")
    (PRED + " --servers -1", ["'--servers': -1 is not in the range x>=1"]),
    (PRED + " --servers 0", ["'--servers': 0 is not in the range x>=1"]),
    (RUN + " --scheme bsp-ps --servers 0", ["'--servers': 0 is not in the range x>=1"]),
    ("sweep {t}/servers_zero.yaml --output {t}/new", ["`servers:`", "must hold integers >= 1", "one per worker node"]),
    ("sweep {t}/ok.yaml --servers 0 --output {t}/new", ["'--servers': 0 is not in the range x>=1"]),
    ("advise --workload bert-base-tiny --servers 0 --output {t}/adv", ["'--servers': 0 is not in the range x>=1"]),
    ("commbench --collective pushpull --servers 0 --output {t}/cb", ["'--servers': 0 is not in the range x>=1"]),
    (PRED + " --schemes nope", ["unknown method 'nope'"]),
    (PRED + " --device-preset nope", ["unknown device preset 'nope'"]),
    (PRED + " --commbench {t}/missing", ["does not exist", "ddlbench commbench"]),
    (PRED + " --commbench {t}/garbage.parquet", ["cannot read table", "ddlbench commbench"]),
    (PRED + " --validate {t}/nope", ["no run at"]),
    (PRED + " --validate {t}/badrun", ["cannot read table"]),
    (PRED + " -o {t}/run", ["-o/--output", "is a directory"]),
    (PRED + " -o {t}/notes.txt/p.parquet", ["which is a file"]),
    ("predict", ["nothing to predict"]),
    # profile
    ("profile resnet50-tiny --seq-len 5 -o {t}/p.parquet", ["takes images", "drop --seq-len"]),
    ("profile resnet50-tiny --batch 0 -o {t}/p.parquet", ["batch must be an integer >= 1"]),
    ("profile bert-base-tiny --seq-len 9999 -o {t}/p.parquet", ["from 1 to 512"]),
    ("profile nope -o {t}/p.parquet", ["unknown workload 'nope'"]),
    ("profile resnet50-tiny -o {t}/run", ["is a directory"]),
    ("profile resnet50-tiny --iters 0 -o {t}/p.parquet", ["--iters"]),
    ("profile resnet50-tiny --device tpu -o {t}/p.parquet", ["unknown device 'tpu'"]),
    # commbench
    ("commbench --timeout nan --output {t}/cb", ["--timeout must be a finite number"]),
    ("commbench --workers 100000 --output {t}/cb", ["100000 workers", "--oversubscribe"]),
    ("commbench --collective nope --output {t}/cb", ["unknown collective 'nope'"]),
    ("commbench --reps 0 --output {t}/cb", ["--reps must be >= 1"]),
    ("commbench --output {t}/notes.txt", ["is a file, not a directory"]),
    # bring your own model: a workload named by its Python path (workloads/base.py: load_python_path)
    (
        "run --workload no_such_pkg_xyz.models:build --output {t}/new",
        ["no module named 'no_such_pkg_xyz'", "PYTHONPATH"],
    ),
    ("run --workload examples.byom_model:nope --output {t}/new", ["has no 'nope'"]),
    ("run --workload examples.byom_model: --output {t}/new", ["nor a Python path", "package.module:function"]),
    (
        "run --workload byom_import_error:build --output {t}/new",
        ["importing byom_import_error failed", "not_a_real_package_for_ddlbench"],
    ),
    ("run --workload byom_bad:not_callable --output {t}/new", ["not a function"]),
    ("run --workload byom_bad:not_a_spec --output {t}/new", ["returned a BagClassifier, not a", "WorkloadSpec"]),
    ("run --workload byom_bad:raises --output {t}/new", ["raises() raised RuntimeError: no weights here"]),
    ("run --workload byom_bad:bad_batch --output {t}/new", ["contract", "batch must be an integer >= 1"]),
    ("run --workload byom_bad:no_params --output {t}/new", ["trainable parameters"]),
    ("run --workload mymodel --output {t}/new", ["unknown workload 'mymodel'", "package.module:function"]),
    ("sweep {t}/byom_missing.yaml --output {t}/new", ["no module named 'no_such_pkg_xyz'"]),
    ("profile byom_bad:not_a_spec -o {t}/p.parquet", ["WorkloadSpec"]),
    ("predict --workload byom_bad:raises --device-preset study-gpu", ["no weights here"]),
    # advise
    ("advise --workload nope --output {t}/new", ["unknown workload 'nope'"]),
    ("advise --workload bert-base-tiny --workers 1 --output {t}/new", ["--workers >= 2"]),
    ("advise --workload bert-base-tiny --schemes ddp,nope --output {t}/new", ["unknown scheme 'nope'"]),
    ("advise --workload bert-base-tiny --target-ci 3 --output {t}/new", ["--target-ci must be between 0 and 1"]),
    ("advise --workload bert-base-tiny --link nope --output {t}/new", ["nope"]),
    ("advise --workload bert-base-tiny --link eth-10g --commbench {t}/cbrun --output {t}/new", ["give one"]),
    (
        "advise --workload bert-base-tiny --profile {t}/missing.parquet --output {t}/new",
        ["does not exist", "ddlbench profile"],
    ),
    ("advise --workload bert-base-tiny --output {t}/run", ["already holds a run", "--resume"]),
    ("advise --workload byom_bad:not_a_spec --output {t}/new", ["WorkloadSpec"]),
    ("advise --workload bert-base-tiny --budget abc --output {t}/new", ["--budget 'abc' is not a duration", "10m"]),
    ("advise --workload bert-base-tiny --budget 0s --output {t}/new", ["not a duration"]),
]


def _make_readonly(d: Path) -> None:
    """A directory nobody may create entries in: root ignores permission bits, so as root use the
    immutable attribute (chattr +i) instead."""
    d.mkdir()
    if os.geteuid() == 0:
        subprocess.run(["chattr", "+i", str(d)], check=True)
    else:
        d.chmod(0o555)


@pytest.fixture(scope="module")
def t(tmp_path_factory):
    d = tmp_path_factory.mktemp("bad")
    (d / "garbage.parquet").write_bytes(b"this is not a parquet file at all")
    whole = d / "whole.parquet"
    pd.DataFrame({"a": range(1000)}).to_parquet(whole)
    (d / "truncated.parquet").write_bytes(whole.read_bytes()[:400])
    (d / "notes.txt").write_text("notes\n")
    (d / "binary.yaml").write_bytes(b"\xff\xfe\x00\x81 binary")
    run = d / "run"
    (run / "cells" / "c1").mkdir(parents=True)
    base = {
        "schema_version": 1,
        "run_id": "run",
        "cell_id": "c1",
        "source": "measured",
        "status": "ok",
        "reason": "",
        "workload": "resnet50-tiny",
        "sample_unit": "img",
        "scheme": "ddp",
        "backend": "torch",
        "workers": 2,
        "servers": 0,
        "batch_per_worker": 8,
        "global_batch": 16,
        "seq_len": None,
        "knobs_json": "{}",
        "network": "loopback",
        "throughput_median": 100.0,
    }
    pd.DataFrame([base]).to_parquet(run / "summary.parquet")
    pd.DataFrame(
        [
            {"schema_version": 1, "run_id": "run", "cell_id": "c1", "rank": 0, "iteration": i, "iter_s": 0.16}
            for i in range(8)
        ]
    ).to_parquet(run / "raw.parquet")
    pd.DataFrame([{"schema_version": 1, "run_id": "run", "fingerprint": "fp"}]).to_parquet(run / "environment.parquet")
    for name, data in (("badrun", b"PAR1 garbage"), ("truncrun", (run / "summary.parquet").read_bytes()[:200])):
        (d / name).mkdir()
        (d / name / "summary.parquet").write_bytes(data)
    (d / "foreignrun").mkdir()
    pd.DataFrame([{"cell_id": "c", "status": "ok"}]).to_parquet(d / "foreignrun" / "summary.parquet")
    (d / "cbrun").mkdir()
    pd.DataFrame(
        [{"collective": "allreduce", "workers": 2, "size_bytes": 4, "time_s": 1e-3, "network": "lo"}]
    ).to_parquet(d / "cbrun" / "commbench.parquet")
    (d / "badpart" / "cells" / "c1").mkdir(parents=True)
    (d / "badpart" / "cells" / "c1" / "summary.parquet").write_bytes(b"PAR1 torn part")
    for name, body in SWEEPS.items():
        (d / f"{name}.yaml").write_text(body)
    _make_readonly(d / "readonly")
    yield d
    if os.geteuid() == 0:
        subprocess.run(["chattr", "-i", str(d / "readonly")], check=False)


def test_there_are_enough_cases():
    assert len(CASES) >= 60
    assert len({c for c, _ in CASES}) == len(CASES), "a case is listed twice"


@pytest.mark.parametrize("line, words", CASES, ids=[c for c, _ in CASES])
def test_bad_input_is_one_line_and_exit_2(t, line, words, monkeypatch):
    monkeypatch.chdir(t)  # default output paths (results/...) land in the fixture, never the repository
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    args = [a.replace("{t}", str(t)) for a in shlex.split(line)]
    res = CliRunner().invoke(cli, args)
    text = res.stdout + res.stderr
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert "Traceback" not in text, text
    assert res.exit_code == 2, f"exit {res.exit_code}: {text}"
    lines = [x for x in res.stderr.splitlines() if x.strip()]
    assert len(lines) == 1, res.stderr
    err = lines[0]
    assert err.startswith("error: "), err
    assert any(sep in err for sep in ("; ", ": ")) and len(err) > 40, f"what/why/fix missing: {err}"
    for w in words:
        assert w.replace("{t}", str(t)) in err, f"{w!r} not in {err!r}"
    assert not (t / "new").exists() or not any((t / "new").iterdir()), "a refused run wrote results"


def test_a_foreign_cell_folder_with_a_torn_table_is_named_and_skipped_by_resume(t, monkeypatch):
    """Once a bad input (the resume refused the torn part), now a foreign folder under cells/: named once and
    skipped, the sweep's own cells measured (docs/ARCHITECTURE.md, "Results"; issue 52)."""
    monkeypatch.chdir(t)
    res = CliRunner().invoke(cli, ["sweep", str(t / "ok.yaml"), "--output", str(t / "badpart"), "--resume"])
    text = res.stdout + res.stderr
    assert res.exit_code == 0, text
    assert text.count(str(t / "badpart" / "cells" / "c1")) == 1 and "Traceback" not in text, text
    assert (t / "badpart" / "summary.parquet").exists()


def test_a_bad_input_is_clean_in_a_real_process_too(t):
    """One case end to end through the installed entry point (click's runner shares the process)."""
    res = subprocess.run(
        ["ddlbench", "run", "--workload", "bert-base-tiny", "--timeout", "nan", "--output", str(t / "new")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and res.stderr.startswith("error: timeout must be a finite")
    assert "Traceback" not in res.stdout + res.stderr
