"""`planner launch`: the plan loader, the target contract (every registered target), refusals
as one line with exit 2, and --emit on optimize and pareto.

The tools' own validators check the files in test_launch_tools.py; the reference scripts run
in test_launch_examples.py.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import yaml

from planner.cli import main
from planner.errors import BadInput
from planner.launch.plan import LaunchPlan, load_plan
from planner.launch.registry import TARGETS, emit, parse_targets
from planner.launch.target import LaunchOptions, Refused

LLAMA70 = dict(
    net="llama3-70b",
    device="H100_SXM",
    network="ib_ndr",
    gpus=512,
    gpus_per_node=8,
    precision="bf16",
    scheme="ring",
    microbatch=2,
    accumulation=1,
    global_batch=128,
    tp=8,
    sp=True,
    zero=2,
    seq_len=8192,
)


def llm(**kw) -> LaunchPlan:
    from planner import catalog

    fields = {**LLAMA70, **kw}
    fields["model"] = catalog.net_spec(fields["net"])["model"]
    dp = fields["gpus"] // (fields.get("tp", 1) * fields.get("pp", 1))
    fields["global_batch"] = fields["microbatch"] * fields["accumulation"] * dp
    return LaunchPlan(**fields)


def cnn(**kw) -> LaunchPlan:
    fields = dict(
        net="resnet50",
        device="H100_SXM",
        network="ib_ndr",
        gpus=64,
        gpus_per_node=8,
        precision="bf16",
        scheme="ring",
        microbatch=128,
        accumulation=1,
        global_batch=8192,
    )
    return LaunchPlan(**{**fields, **kw})


# Plans every target is run against: the contract holds for each (files, or a one-line refusal).
PLANS = {
    "llama70-tp8-sp-zero2": llm(),
    "llama70-pp4-zero3": llm(tp=8, pp=4, zero=3, accumulation=8, interleave=2),
    "llama70-pp4-zero1-full": llm(tp=8, pp=4, zero=1, accumulation=8, recompute="full", interleave=2),
    "llama8-dp-zero3": llm(net="llama3-8b", gpus=64, tp=1, sp=False, zero=3, microbatch=1, accumulation=4),
    "llama8-dp-zero0": llm(net="llama3-8b", gpus=64, tp=1, sp=False, zero=0, microbatch=1),
    "llama8-tp2-zero1": llm(net="llama3-8b", gpus=64, tp=2, sp=False, zero=1, microbatch=1),
    "gpt3-fp8-selective": llm(
        net="gpt3-175b", gpus=1024, tp=8, pp=8, zero=1, precision="fp8", recompute="selective"
    ),
    "resnet50": cnn(),
    "vgg16-single-node": cnn(net="vgg16", gpus=8, global_batch=1024),
}


@pytest.mark.parametrize("name", TARGETS)
@pytest.mark.parametrize("plan_key", PLANS)
def test_every_target_writes_files_or_refuses_in_one_line(name, plan_key):
    """The contract: refusal() is None or one line; files() is non-empty text, scripts start
    with a shebang; a scheduler brings its engine's files."""
    target, plan = TARGETS[name], PLANS[plan_key]
    why = target.refusal(plan)
    if why is not None:
        assert why and "\n" not in why
        with pytest.raises(Refused, match=f"--target {name} cannot run this plan"):
            emit(plan, [target], LaunchOptions())
        return
    try:
        files = emit(plan, [target], LaunchOptions())
    except Refused as exc:  # a scheduler whose default engine (torchrun) refuses
        assert target.scheduler and "wraps torchrun" in str(exc)
        return
    assert files and all(isinstance(v, str) and v for v in files.values())
    for fname, text in files.items():
        if fname.endswith((".sh", ".sbatch")):
            assert text.startswith("#!/usr/bin/env bash\n")


def test_every_target_runs_some_plan():
    """No target refuses everything the contract plans cover."""
    for name, target in TARGETS.items():
        runs = [k for k, p in PLANS.items() if target.refusal(p) is None]
        assert runs, name


def test_llm_plan_numbers_in_every_engine():
    """The plan's degrees and batch sizes appear in each engine that accepts it."""
    plan = PLANS["llama8-dp-zero3"]
    files = emit(
        plan, parse_targets("torchrun,megatron,nemo,torchtitan,deepspeed,accelerate"), LaunchOptions()
    )
    assert "--micro-batch-size 1\n--global-batch-size 256\n" in files["megatron_args.txt"]
    assert "--use-torch-fsdp2" in files["megatron_args.txt"]
    assert "train.global_batch_size=256\n" in files["nemo_overrides.txt"]
    assert "ddp.data_parallel_sharding_strategy=optim_grads_params\n" in files["nemo_overrides.txt"]
    assert "--parallelism.data_parallel_shard_degree 64\n" in files["torchtitan_args.txt"]
    assert "--parallelism.fsdp_reshard_after_forward always\n" in files["torchtitan_args.txt"]
    assert "data_parallel_shard_degree = 64\n" in files["torchtitan_job.toml"]
    assert 'fsdp_reshard_after_forward = "always"\n' in files["torchtitan_job.toml"]
    ds = json.loads(files["ds_config.json"])
    assert (
        ds["train_batch_size"],
        ds["train_micro_batch_size_per_gpu"],
        ds["gradient_accumulation_steps"],
    ) == (256, 1, 4)
    assert ds["zero_optimization"]["stage"] == 3
    assert "fsdp_reshard_after_forward: true" in files["accelerate_config.yaml"]
    assert "--batch 1 --accumulation 4 --precision bf16 --zero 3" in files["torchrun.sh"]
    config = json.loads(files["model_config.json"])
    assert (config["model_type"], config["num_hidden_layers"], config["num_key_value_heads"]) == (
        "llama",
        32,
        8,
    )


@pytest.mark.parametrize(
    "target, plan, rule",
    [
        ("megatron", cnn(), "is a CNN"),
        (
            "megatron",
            PLANS["llama70-pp4-zero3"],
            "'--use-torch-fsdp2 is not supported with pipeline parallelism'",
        ),
        ("megatron", llm(tp_overlap=True, sp=False), "only when sequence parallelism is enabled"),
        (
            "deepspeed",
            llm(tp=8, pp=4, zero=2),
            "'ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism'",
        ),
        ("deepspeed", PLANS["llama70-pp4-zero1-full"], "no interleaved (virtual) stages"),
        ("deepspeed", llm(tp_overlap=True), "no tensor-parallel communication overlap"),
        ("torchtitan", PLANS["llama8-tp2-zero1"], "no ZeRO-1"),
        ("torchtitan", PLANS["gpt3-fp8-selective"], "no config_registry entry for gpt3-175b"),
        (
            "torchtitan",
            llm(net="llama3-8b", gpus=64, tp=2, sp=False, zero=3, microbatch=1, precision="fp8"),
            "always shards the sequence (the plan has it off), and torchtitan 0.3 sets Float8",
        ),
        ("torchrun", llm(), "--target torchtitan runs it under torchrun"),
        ("accelerate", PLANS["llama70-pp4-zero1-full"], "no expert-parallel or interleaved-pipeline"),
        ("accelerate", llm(tp=8, pp=4, zero=3, accumulation=8), "shards only optimizer state"),
        ("accelerate", llm(zero=1), "always recomputes activations"),
        ("accelerate", llm(), "enable_sequence_parallel is not wired up"),
        ("accelerate", llm(tp=4, sp=False, cp=2, zero=1), "context parallelism under FSDP2 only"),
        ("accelerate", llm(tp=1, sp=False, cp=2, zero=3, cp_comm="a2a"), "all-to-all over heads"),
        ("accelerate", llm(tp=8, sp=False, zero=3, gpus=8), "TP 8 takes every GPU of the plan"),
        (
            "accelerate",
            llm(tp=4, sp=False, zero=3, tp_overlap=True),
            "no tensor-parallel communication overlap",
        ),
        ("accelerate", llm(net="gpt2-xl", tp=2, sp=False, zero=3), "no tensor-parallel plan for gpt2"),
        ("accelerate", llm(net="llama3-8b", tp=16, sp=False, zero=3, gpus=64), "8 key/value heads, TP 16"),
        ("nemo", PLANS["vgg16-single-node"], "is a CNN"),
        ("skypilot", cnn(device="K80"), "no accelerator name for K80"),
    ],
)
def test_refusals_cite_the_rule(target, plan, rule):
    assert rule in TARGETS[target].refusal(plan)


def test_model_parallel_plans_take_megatron_engines():
    """deepspeed runs TP/SP through Megatron-DeepSpeed, accelerate through its Megatron-LM plugin;
    a data-parallel plan keeps the reference script."""
    tp_sp = llm(tp=4, zero=3, microbatch=1, accumulation=4)
    files = emit(tp_sp, parse_targets("deepspeed"), LaunchOptions())
    assert "--tensor-model-parallel-size 4\n" in files["megatron_deepspeed_args.txt"]
    assert "--sequence-parallel\n--bf16\n--zero-stage 3\n" in files["megatron_deepspeed_args.txt"]
    assert "--no-pipeline-parallel\n" in files["megatron_deepspeed_args.txt"]
    assert "optimizer" not in json.loads(files["ds_config.json"])  # Megatron builds it
    assert "CUDA_DEVICE_MAX_CONNECTIONS=1 torchrun" in files["deepspeed.sh"]
    assert "train_lm.py" not in files
    plugin = emit(llm(zero=1, recompute="selective"), parse_targets("accelerate"), LaunchOptions())
    cfg = plugin["accelerate_config.yaml"]
    assert "distributed_type: MEGATRON_LM\n" in cfg and "megatron_lm_tp_degree: 8\n" in cfg
    assert "megatron_lm_context_parallel_size: 1\n" in cfg  # the plugin's own default is 2
    assert "megatron_lm_recompute_granularity: selective\n" in cfg
    assert "--recompute none" in plugin["accelerate.sh"]  # Megatron recomputes, not the script


def test_accelerate_runs_tensor_and_context_parallel_plans_on_fsdp2():
    """TP and CP with ZeRO 2 or 3: FSDP2 with a parallelism_config (dp_shard = data-parallel
    GPUs, tp, cp); ZeRO 2 keeps parameters gathered after the forward pass."""
    plan = llm(net="llama3-8b", gpus=64, tp=2, sp=False, zero=2, microbatch=1, accumulation=4)
    cfg = yaml.safe_load(emit(plan, parse_targets("accelerate"), LaunchOptions())["accelerate_config.yaml"])
    assert cfg["distributed_type"] == "FSDP" and cfg["fsdp_config"]["fsdp_version"] == 2
    assert cfg["fsdp_config"]["fsdp_reshard_after_forward"] is False
    assert cfg["parallelism_config"] == {
        "parallelism_config_dp_replicate_size": 1,
        "parallelism_config_dp_shard_size": 32,
        "parallelism_config_tp_size": 2,
        "parallelism_config_cp_size": 1,
    }
    ring = llm(tp=1, sp=False, cp=4, zero=3, recompute="full")  # p2p: a ring of key/value shards
    files = emit(ring, parse_targets("accelerate"), LaunchOptions())
    cfg = yaml.safe_load(files["accelerate_config.yaml"])
    assert cfg["parallelism_config"]["parallelism_config_cp_size"] == 4
    assert cfg["parallelism_config"]["parallelism_config_dp_shard_size"] == 512 // 4
    assert cfg["parallelism_config"]["parallelism_config_cp_comm_strategy"] == "alltoall"
    assert cfg["fsdp_config"]["fsdp_activation_checkpointing"] is True
    assert "--recompute none" in files["accelerate.sh"]  # FSDP recomputes, not the script
    gather = yaml.safe_load(
        emit(
            llm(tp=1, sp=False, cp=4, zero=3, cp_comm="all_gather"),
            parse_targets("accelerate"),
            LaunchOptions(),
        )["accelerate_config.yaml"]
    )
    assert gather["parallelism_config"]["parallelism_config_cp_comm_strategy"] == "allgather"
    assert gather["fsdp_config"]["fsdp_activation_checkpointing"] is False


def test_torchtitan_writes_the_file_each_release_reads():
    """0.2.x reads the TOML (no TP without SP), 0.3 the options (no Float8 option)."""
    fp8 = emit(
        llm(net="llama3-8b", gpus=64, tp=2, zero=3, precision="fp8"),
        parse_targets("torchtitan"),
        LaunchOptions(),
    )
    assert 'converters = ["quantize.linear.float8"]' in fp8["torchtitan_job.toml"]
    assert "torchtitan_args.txt" not in fp8 and "torchtitan 0.3 cannot run this plan" in fp8["torchtitan.sh"]
    no_sp = emit(
        PLANS["llama8-dp-zero3"].__class__(
            **{**PLANS["llama8-dp-zero3"].__dict__, "tp": 2, "global_batch": 128}
        ),
        parse_targets("torchtitan"),
        LaunchOptions(),
    )
    assert (
        "torchtitan_job.toml" not in no_sp
        and "--parallelism.no-enable-sequence-parallel" in no_sp["torchtitan_args.txt"]
    )


@pytest.mark.parametrize("engine", ["torchrun", "megatron", "torchtitan", "deepspeed", "accelerate"])
def test_slurm_runs_every_engines_node_command_as_bash(engine, tmp_path):
    """The node command each task runs is valid bash (an environment prefix, a compound command)."""
    import subprocess

    plan = next(p for p in PLANS.values() if TARGETS[engine].refusal(p) is None)
    files = emit(plan, parse_targets(f"{engine},slurm"), LaunchOptions())
    srun = files["job.sbatch"].strip().splitlines()[-1]
    inner = srun.split("bash -c ", 1)[1]
    (tmp_path / "inner.sh").write_text(
        subprocess.run(["bash", "-c", f"printf %s {inner}"], capture_output=True, text=True).stdout
    )
    for path in (tmp_path / "inner.sh",):
        assert subprocess.run(["bash", "-n", str(path)], capture_output=True).returncode == 0
    assert (
        "exec " not in srun
        and TARGETS[engine].node_command(plan, LaunchOptions()) in (tmp_path / "inner.sh").read_text()
    )


def test_nemo_takes_zero3_with_pipeline():
    """Megatron-Bridge shards ZeRO-3 with Megatron-FSDP, so the FSDP2 rule does not apply."""
    assert TARGETS["nemo"].refusal(PLANS["llama70-pp4-zero3"]) is None


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Seeded runs of the issue: the best plans of llama3-70b on 512 H100 and resnet50 on 64."""
    root = tmp_path_factory.mktemp("runs")
    common = ["--gpu", "H100_SXM", "--network", "ib_ndr", "--format", "json"]
    assert main(["optimize", "llama3-70b", "--budget", "512gpus", *common, "--out", str(root / "llama")]) == 0
    assert main(["optimize", "resnet50", "--budget", "64gpus", *common, "--out", str(root / "resnet")]) == 0
    return root


def test_load_plan_from_a_run_folder_matches_run_json(runs):
    best = json.loads((runs / "llama" / "run.json").read_text())["best"]
    plan = load_plan(runs / "llama")
    assert (plan.gpus, plan.tp, plan.pp, plan.dp, plan.zero) == (
        best["gpus"],
        best["tp"],
        best["pp"],
        best["dp"],
        best["zero"],
    )
    assert (plan.microbatch, plan.global_batch, plan.seq_len) == (
        best["microbatch"],
        best["global_batch"],
        best["seq_len"],
    )
    assert plan.sp == (best["sp"] == "on") and plan.transformer


def test_cli_refusal_is_one_line_exit_2(runs, tmp_path, capsys):
    assert main(["launch", str(runs / "resnet"), "--target", "megatron", "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: --target megatron cannot run this plan")
    assert not list(tmp_path.iterdir())  # nothing written


@pytest.mark.parametrize(
    "content, message",
    [
        ("{", "malformed JSON"),
        ("[]", "not a JSON object"),
        ('{"hello": 1}', "neither a plan_<k>.json"),
        ('{"device": "H100_SXM", "workers": 8, "net": "resnet50"}', "field 'gpus_per_node'"),
        (
            '{"device": "H100_SXM", "workers": 12, "gpus_per_node": 8, "net": "resnet50"}',
            "does not fill nodes",
        ),
        (
            '{"device": "H100_SXM", "workers": 8, "gpus_per_node": 8, "net": "resnet50", "network": "ib_ndr",'
            ' "precision": "bf17", "scheme": "ring", "batch_per_worker": 8}',
            "field 'precision' is 'bf17'",
        ),
        (
            '{"device": "H100_SXM", "workers": 8, "gpus_per_node": 8, "net": "nonet", "network": "ib_ndr",'
            ' "precision": "bf16", "scheme": "ring", "batch_per_worker": 8}',
            "unknown net 'nonet'",
        ),
    ],
)
def test_malformed_plans_are_one_line_exit_2(tmp_path, capsys, content, message):
    path = tmp_path / "plan_0.json"
    path.write_text(content)
    with pytest.raises(BadInput, match=message):
        load_plan(path)
    assert main(["launch", str(path), "--target", "torchrun", "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


def test_unknown_target_lists_the_valid_ones(runs, tmp_path, capsys):
    assert main(["launch", str(runs / "resnet"), "--target", "kubeflow", "-o", str(tmp_path)]) == 2
    assert "--target 'kubeflow' (valid: torchrun, slurm, skypilot" in capsys.readouterr().err


def test_emit_on_optimize_writes_the_best_plan(tmp_path, capsys):
    out = tmp_path / "run"
    args = ["optimize", "resnet50", "--budget", "16gpus", "--gpu", "H100_SXM", "--trials", "40"]
    assert main([*args, "--out", str(out), "--emit", "torchrun,skypilot", "--format", "json"]) == 0
    best = json.loads((out / "run.json").read_text())["best"]
    sky = (out / "launch" / "sky_task.yaml").read_text()
    assert f"num_nodes: {best['nodes']}" in sky and f"H100:{best['gpus_per_node']}" in sky
    assert f"--batch {best['batch_per_worker']} " in (out / "launch" / "torchrun.sh").read_text()


def test_emit_on_pareto_writes_the_first_front_plan(tmp_path):
    out = tmp_path / "front"
    args = [
        "pareto",
        "resnet50",
        "--budget",
        "16gpus",
        "--gpu",
        "H100_SXM",
        "--trials",
        "40",
        "--out",
        str(out),
    ]
    assert main([*args, "--emit", "slurm"]) == 0
    plan = json.loads((out / "plan_0.json").read_text())
    assert (
        f"#SBATCH --nodes={plan['workers'] // plan['gpus_per_node']}\n"
        in (out / "launch" / "job.sbatch").read_text()
    )


def test_target_on_optimize_keeps_the_search_to_what_it_runs(tmp_path):
    out = tmp_path / "run"
    args = ["optimize", "llama3-70b", "--budget", "512gpus", "--gpu", "H100_SXM", "--network", "ib_ndr"]
    dp_out = tmp_path / "dp"
    assert main([*args, "--target", "accelerate", "--out", str(dp_out), "--format", "json"]) == 0
    plan = load_plan(dp_out)
    assert TARGETS["accelerate"].refusal(plan) is None and not plan.sp and plan.pp == 1
    assert main([*args, "--target", "deepspeed", "--out", str(out), "--format", "json"]) == 0
    plan = load_plan(out)  # Megatron-DeepSpeed: no interleaving, no TP overlap
    assert TARGETS["deepspeed"].refusal(plan) is None and plan.interleave == 1 and not plan.tp_overlap
    ds = json.loads((out / "launch" / "ds_config.json").read_text())
    assert ds["train_batch_size"] == plan.global_batch


def test_target_on_optimize_refuses_an_axis_it_cannot_run(capsys):
    args = ["optimize", "llama3-70b", "--budget", "64gpus", "--tp", "8", "--target", "torchrun"]
    assert main(args) == 2
    assert "--tp 8: --target torchrun runs none of it (it takes: 1)" in capsys.readouterr().err


def test_emit_unknown_target_fails_before_the_search(capsys):
    assert main(["optimize", "resnet50", "--budget", "16gpus", "--emit", "k8s"]) == 2
    assert "--emit 'k8s'" in capsys.readouterr().err


def test_fields_are_frozen():
    with pytest.raises(AttributeError):
        replace(PLANS["resnet50"]).gpus = 3  # type: ignore[misc]


def test_sweep_cell_is_a_plan(tmp_path, capsys):
    """`planner launch SPEC.yaml#N` launches the best plan of a finished sweep cell."""
    spec = tmp_path / "sweep.yaml"
    spec.write_text(
        f"name: cells\ntrials: 20\nresults: {tmp_path / 'sweeps'}\n"
        "grid:\n  net: [resnet50]\n  budget: [8gpus, 16gpus]\n"
        "options:\n  gpu: H100_SXM\n  network: ib_ndr\n"
    )
    assert main(["sweep", "run", str(spec), "--workers", "1"]) == 0
    plan = load_plan(f"{spec}#1")
    assert plan.net == "resnet50" and plan.gpus <= 16 and plan.device == "H100_SXM"
    assert main(["launch", f"{spec}#2", "--target", "torchrun", "-o", str(tmp_path / "out")]) == 2
    assert "no cell 2 in" in capsys.readouterr().err


def test_torchrun_refuses_a_config_llama_cannot_carry(tmp_path, capsys):
    """A Qwen3 config.json (per-head QK norms, a head width of its own) is not written out as a
    Llama config: the reference LM script would train another model."""
    import json as _json

    from planner.cli import main as cli

    qwen3 = {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "hidden_size": 1024,
        "intermediate_size": 3072,
        "num_hidden_layers": 4,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "vocab_size": 151936,
        "max_position_embeddings": 4096,
        "tie_word_embeddings": True,
        "hidden_act": "silu",
    }
    path = tmp_path / "config.json"
    path.write_text(_json.dumps(qwen3))
    argv = ["optimize", str(path), "--budget", "8gpus", "--gpu", "H100_SXM", "--out", str(tmp_path / "r")]
    assert cli([*argv, "--emit", "torchrun"]) == 2
    err = capsys.readouterr().err
    assert "no Hugging Face causal-LM class matches" in err and "qk_norm, head_dim" in err
    llama = {**qwen3, "architectures": ["LlamaForCausalLM"], "model_type": "llama"}
    del llama["head_dim"]
    other = tmp_path / "llama" / "config.json"  # a new path: specs are cached by path
    other.parent.mkdir()
    other.write_text(_json.dumps(llama))
    argv[1] = str(other)
    assert cli([*argv, "--emit", "torchrun"]) == 0


def test_accelerate_keeps_the_search_to_plans_it_runs_whole():
    """Tensor and context parallelism run on FSDP2 only, so where the search may pick them it
    keeps to ZeRO 2 and 3; a search of ZeRO 0 or 1 keeps to data parallelism (DDP, ZeRO-1)."""
    from planner.launch.limits import restrict_axes

    free = restrict_axes("llama3-8b", "accelerate", {})
    assert (free["zero"], free["sp"], free["pp"], free["ep"]) == ("2,3", "off", "1", "1")
    assert "tp" not in free and "cp" not in free and free["cp_comm"] == "p2p,all_gather"
    assert restrict_axes("llama3-8b", "accelerate", {"zero": "0,1,3"})["zero"] == "3"
    ddp = restrict_axes("llama3-8b", "accelerate", {"zero": "0,1"})
    assert (ddp["zero"], ddp["tp"], ddp["cp"]) == ("0,1", "1", "1")
    dp_only = restrict_axes("llama3-8b", "accelerate", {"tp": "1", "cp": "1"})
    assert "zero" not in dp_only  # every stage runs without model parallelism
    with pytest.raises(
        BadInput, match="--tp 2: --target accelerate runs tensor and context parallelism with ZeRO 2"
    ):
        restrict_axes("llama3-8b", "accelerate", {"zero": "0", "tp": "2"})
