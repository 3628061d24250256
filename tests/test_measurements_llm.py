"""The shipped transformer measurements: loading, metric conversions, measurement nets, validation.

Reference figures are the sources' own: Megatron-LM's README (commit 152aab3, 2021-01-11) says its
GPT-3 175B example takes "around 32 seconds" an iteration of 1536 sequences on 1024 A100 at 138
teraFLOP/s per GPU; its 2021 table (commit 50a4b5f) gives the 1T model 502.0 aggregate petaFLOP/s
on 3072 GPUs and 1008.0 billion parameters; its 2024 H100 table (commit f2e5db4) gives 19.6
aggregate petaFLOP/s for the 1.7B model on 48 GPUs.
"""

from __future__ import annotations

import csv

import numpy as np
import pytest

from costs.rules import MODERN
from costs.specs import layers
from costs.specs.transformer_spec import build_layers
from planner import catalog
from planner.calibrate import commands, measurements
from planner.calibrate.fitting import predict
from planner.calibrate.predict import RunTable, predictable
from planner.metrics.model import default_profile

COUNTS = {"cnn.csv": 201, "transformer.csv": 105, "llm.csv": 242}


@pytest.fixture(scope="module")
def shipped() -> dict[str, list[measurements.Run]]:
    return {p.name: measurements.load(p) for p in measurements.shipped()}


def _one(runs, **kw) -> measurements.Run:
    hits = [r for r in runs if all(getattr(r, k) == v for k, v in kw.items())]
    assert len(hits) == 1, kw
    return hits[0]


def test_the_shipped_files_load_whole(shipped):
    assert {k: len(v) for k, v in shipped.items()} == COUNTS
    for runs in shipped.values():
        for r in runs:
            assert catalog.net_path(r.net).is_file()
            assert r.samples_per_s > 0 and np.isfinite(r.samples_per_s)


def test_transformer_runs_span_two_generations_and_both_families(shipped):
    """Issue 11: >= 10 cited transformer runs, BERT and GPT-style, on >= 2 GPU generations."""
    runs = shipped["transformer.csv"] + shipped["llm.csv"]
    generations = {catalog.device(r.device).raw.get("generation") for r in runs}
    assert len(runs) >= 10 and len(generations) >= 2
    assert {"bert-large", "gpt3-175b", "megatron-1t"} <= {r.net for r in runs}
    # issue 12: >= 3 published LLM runs with their tensor- and pipeline-parallel split
    assert sum(r.model_parallel for r in shipped["llm.csv"]) >= 3


def test_tflops_per_gpu_reads_as_sequences_per_second(shipped):
    llm = shipped["llm.csv"]
    gpt3 = _one(llm, source="megatron-lm-readme-gpt3-175b")
    assert 1536 / gpt3.samples_per_s == pytest.approx(32.0, rel=0.02)  # "around 32 seconds"
    one_t = _one(llm, net="megatron-1t")
    aggregate = one_t.samples_per_s * one_t.flops_per_sample / 1e15
    assert aggregate == pytest.approx(502.0, rel=0.005)
    core = _one(llm, net="megatron-core-gpt-1.7b")
    assert core.samples_per_s * core.flops_per_sample / 1e15 == pytest.approx(19.6, rel=0.005)


def test_model_parallel_split_is_the_published_one(shipped):
    """Every Megatron run: DP x micro-batch x micro-batches = the global batch in its notes."""
    for r in shipped["llm.csv"]:
        if not r.source.startswith("megatron"):
            continue
        dp = r.gpus // (r.tp * r.pp)
        assert dp * r.tp * r.pp == r.gpus
        assert r.recompute in ("full", "none", "")
    t1 = _one(shipped["llm.csv"], net="megatron-1t")
    assert (t1.tp, t1.pp, t1.gpus // 512, t1.batch_per_gpu * 6 * t1.accumulation) == (8, 64, 6, 3072)


def test_measurement_nets_resolve_but_stay_out_of_the_zoo():
    extra = catalog.measurement_nets()
    assert len(extra) == 31 and not set(extra) & set(catalog.zoo())  # llama2-70b moved to the zoo
    assert catalog.net_path("megatron-1t") == extra["megatron-1t"]
    for name in extra:
        spec = catalog.net_spec(name)
        assert spec["layers"] == build_layers(spec["model"]), name  # generated, not edited


@pytest.mark.parametrize(
    "name,published,digits",
    [
        ("megatron-1t", 1008.0e9, 0.05e9),
        ("megatron-gpt-530b", 529.6e9, 0.05e9),
        ("megatron-core-gpt-7.1b", 7.1e9, 0.05e9),
        ("qwen3-30b-a3b", 30.5e9, 0.05e9),  # model card: 30.5B in total
    ],
)
def test_measurement_net_parameters_match_the_tables(name, published, digits):
    net = catalog.load_net(name, "planner")
    assert abs(sum(layers.params(s) for s in net.layers) - published) <= digits


def test_qwen3_moe_activates_the_published_share():
    """Qwen3-30B-A3B model card: 3.3B of its parameters activated per token (8 of 128 experts)."""
    from costs.specs import transformer

    net = catalog.load_net("qwen3-30b-a3b", "planner")
    total = sum(layers.params(s) for s in net.layers)
    idle = sum(layers.params(s) - transformer.moe_active_params(s) for s in net.layers if s.type == "MoE")
    assert abs(total - idle - 3.3e9) <= 0.06e9


def test_automodel_qwen3_row_matches_its_step_time(shipped):
    """NeMo AutoModel's DGX-H100 BF16 table prints 21.773 s per step of 512 x 4096 tokens on 8 GPUs
    beside 12,040 tokens/s per GPU: the row reads back as that step time."""
    r = _one(shipped["llm.csv"], net="qwen3-30b-a3b", source="nemo-automodel-2025-10-h100-bf16")
    assert (r.tp, r.pp, r.ep, r.zero, r.accumulation, r.recompute) == (1, 1, 8, 3, 16, "full")
    step_s = r.batch_per_gpu * r.gpus * r.accumulation / r.samples_per_s
    assert step_s == pytest.approx(21.773, rel=1e-3)


def test_automodel_llama3_row_matches_its_step_time(shipped):
    """The same table, April 2026: Llama 3 70B on 64 GPUs with CP 2 (FSDP 32) prints 18.90 s per
    step of 128 x 8192 tokens beside 866.77 tokens/s per GPU; its recipe runs PyTorch's
    context_parallel with the all-gather rotation and checkpoints every layer."""
    r = _one(shipped["llm.csv"], net="llama3-70b", source="nemo-automodel-2026-04-h100-bf16")
    settings = (r.tp, r.pp, r.cp, r.cp_comm, r.zero, r.accumulation, r.recompute)
    assert settings == (1, 1, 2, "all_gather", 3, 4, "full")
    step_s = r.batch_per_gpu * (r.gpus // r.cp) * r.accumulation / r.samples_per_s
    assert step_s == pytest.approx(18.90, rel=1e-3)


@pytest.mark.parametrize(
    "name,d_model,printed",
    [("mpt-125m", 768, 125311488), ("mpt-7b", 4096, 6658859008), ("mpt-70b", 8192, 64862437376)],
)
def test_mpt_nets_match_the_printed_parameter_counts(name, d_model, printed):
    """llm-foundry's benchmark README (commit b2a43a1) prints NumParams at seq 2048; the MPT nets
    leave out the learned position table (2048 x d_model there), nothing else."""
    net = catalog.load_net(name, "planner")
    assert sum(layers.params(s) for s in net.layers) + 2048 * d_model == printed


def test_a_transformer_is_costed_at_the_run_sequence_length():
    full = catalog.net_costs("bert-large", "modern")
    same = catalog.net_costs("bert-large", "modern", seq_len=512)
    short = catalog.net_costs("bert-large", "modern", seq_len=128)
    flops = [
        sum(sum(sum(w.flops) for w in layers.work(s, 1, MODERN).values()) for s in c.net.layers)
        for c in (full, same, short)
    ]
    assert flops[1] == flops[0]
    # a quarter of the tokens, and less than a quarter of the attention-score work
    assert 0.2 < flops[2] / flops[0] < 0.25


def test_model_parallel_runs_are_set_aside_only_under_paleo_rules(shipped):
    """The modern rules predict every run (costs.llm.evaluator models TP and PP); PALEO's rule sets do
    not model them, so validate under them sets the 27 model-parallel runs (23 split by tensor or
    pipeline parallelism, two by expert and two by context parallelism alone) aside in one line."""
    kept, note = predictable(shipped["llm.csv"])
    assert len(kept) == 242 and note == ""
    kept, note = predictable(shipped["llm.csv"], "paleo-2018")
    megatron = [r.net for r in kept if r.source.startswith("megatron")]
    assert megatron == ["megatron-gpt-1.7b", "megatron-core-gpt-1.7b", "llama3-8b"] and len(kept) == 3 + 212
    assert note == "27 model-parallel runs skipped: rules paleo-2018 do not model TP/PP/EP/CP"
    assert predictable(shipped["cnn.csv"], "paleo-2018")[1] == ""


def test_validate_reports_the_transformer_sources():
    out = commands.run_validate([], None).text
    for source in (
        "nvidia-dle-bert-pyt-a100",
        "nvidia-dle-bert-tf-dgx2",
        "megatron-lm-readme-2021-a100",
        "megatron-lm-readme-gpt3-175b",
        "megatron-core-readme-2024-h100",
    ):
        assert source in out
    assert "skipped" not in out


def _ratio(shipped, net: str, **kw) -> float:
    run = _one(shipped["llm.csv"], net=net, **kw)
    return predict(RunTable([run], "modern"), default_profile())[0] / run.samples_per_s


def test_megatron_2021_runs_within_the_stated_band(shipped):
    """Megatron-LM's 2021 A100 runs (Narayanan et al. 2021; README table and GPT-3 175B
    example), full recomputation, TP 8 and PP up to 64, under the shipped profile (fitted on
    cnn.csv and llm.csv, so in sample; held out of the fit the source's median error is 4.1%):
    predicted / measured throughput within 0.85-1.25 (README: LLM reproduction). Measured
    2026-11-23: GPT-3 175B on 1,024 GPUs 1.04 (issue: about 140 TFLOP/s per GPU; the README
    prints 138), the 1T model on 3,072 GPUs 0.96 (issue: 52% of peak), the 1.7B data-parallel
    run 1.20."""
    assert abs(_ratio(shipped, "gpt3-175b", source="megatron-lm-readme-gpt3-175b") - 1) <= 0.10
    assert abs(_ratio(shipped, "megatron-1t") - 1) <= 0.10
    for run in shipped["llm.csv"]:
        if run.source == "megatron-lm-readme-2021-a100":
            assert 0.85 < _ratio(shipped, run.net) < 1.25, run.net


def test_megatron_core_h100_runs_with_their_tp_overlap(shipped):
    """Megatron-Core 2024 on H100 overlaps tensor-parallel communication with GEMMs
    (--tp-comm-overlap, the rows' tp_overlap) and runs ZeRO 1 with sequence parallelism: its runs
    are predicted at 0.79-1.06x under the shipped profile (32B at TP 8: 0.79x; the TP 1 run,
    1.7B: 1.06x; 462B at TP 8, PP 16 with its 7 virtual stages: 0.89x, 0.77x when it was costed
    without interleaving; measured 2026-11-25). The band pins the error so a change is noticed."""
    assert 0.72 < _ratio(shipped, "megatron-core-gpt-32b") < 0.88
    assert 0.98 < _ratio(shipped, "megatron-core-gpt-1.7b") < 1.16
    assert 0.84 < _ratio(shipped, "megatron-core-gpt-462b") < 0.95
    for run in shipped["llm.csv"]:
        if run.source == "megatron-core-readme-2024-h100":
            assert 0.72 < _ratio(shipped, run.net) < 1.16, run.net


# The FP8 H100 runs of NVIDIA's performance summaries (NeMo 24.07; Megatron-Bridge 25.11 and
# 26.04.01; llm.csv notes cite each table and recipe): (source, net, GPUs) -> the printed global
# batch and model TFLOP/s per GPU, and (tp, pp, interleave, ep, cp, cp_comm, zero, sp, tp_overlap,
# recompute) as the printed split and the release's performance recipe set them.
MB25, MB26, NEMO = (
    "megatron-bridge-25.11-h100-fp8",
    "megatron-bridge-26.04.01-h100-fp8",
    "nemo-24.07-h100-fp8",
)
FP8_RUNS = {
    (MB25, "llama3-8b", 8): (128, 744, (1, 1, 1, 1, 1, "p2p", 1, False, False, "")),
    (MB25, "llama3-70b", 64): (128, 719, (4, 8, 5, 1, 1, "p2p", 1, True, True, "none")),
    (MB26, "llama3-70b", 64): (256, 731, (4, 8, 5, 1, 1, "p2p", 1, True, True, "none")),
    (MB26, "qwen3-30b-a3b", 16): (
        1024,
        206,
        (1, 1, 1, 16, 1, "p2p", 1, False, False, "none"),
    ),
    (NEMO, "gpt3-175b", 128): (256, 771, (4, 8, 6, 1, 1, "p2p", 1, True, False, "none")),
    (NEMO, "gpt3-175b", 512): (2048, 888, (4, 8, 6, 1, 1, "p2p", 1, True, True, "none")),
    (NEMO, "llama3-8b", 8): (128, 711, (1, 1, 1, 1, 2, "p2p", 1, False, False, "none")),
    (NEMO, "llama3-70b", 64): (128, 734, (4, 4, 5, 1, 2, "p2p", 1, True, True, "none")),
}


def _fp8(shipped) -> list[measurements.Run]:
    """The FP8 runs of NVIDIA's summaries (DeepSeek-V3's report prints no split table:
    tests/test_llm_experts.py checks its row)."""
    return [r for r in shipped["llm.csv"] if r.precision == "fp8" and not r.source.startswith("deepseek-")]


def test_fp8_runs_carry_the_published_split_and_their_recipe_settings(shipped):
    runs = _fp8(shipped)
    assert sorted((r.source, r.net, r.gpus) for r in runs) == sorted(FP8_RUNS)
    for r in runs:
        batch, _, settings = FP8_RUNS[(r.source, r.net, r.gpus)]
        assert r.gpus // (r.tp * r.pp * r.cp) * r.batch_per_gpu * r.accumulation == batch, r.source
        got = (r.tp, r.pp, r.interleave, r.ep, r.cp, r.cp_comm, r.zero, r.sp, r.tp_overlap, r.recompute)
        assert got == settings


def test_pipelines_interleave_whole_layers(shipped):
    """Megatron gives every virtual pipeline stage the same number of layers: pp x interleave
    divides the layers (Llama 3 70B: 80 = 8 x 5 x 2; GPT-3 175B: 96 = 8 x 6 x 2)."""
    for r in shipped["llm.csv"]:
        layers = catalog.net_spec(r.net)["model"]["n_layers"]
        if not r.source.startswith("deepseek-"):  # HAI-LLM: 61 layers, PP 16
            assert layers % (r.pp * r.interleave) == 0, (r.source, r.net)
        assert r.interleave == 1 or r.pp > 1
    assert {r.interleave for r in shipped["llm.csv"]} == {1, 5, 6, 7, 12, 16, 23, 42}


def test_megatron_core_readme_pipelines_are_interleaved_one_layer_per_stage(shipped):
    """Megatron-Core's 2024 README overlaps pipeline communication in every run, and
    Megatron-LM at its commit turns that overlap off without virtual stages (arguments.py,
    validate_args): each PP > 1 run interleaves. 23 and 7 layers per stage (119B, 462B) split
    only into single layers; the others take the same one layer per virtual stage."""
    runs = [r for r in shipped["llm.csv"] if r.source == "megatron-core-readme-2024-h100"]
    piped = {r.net: (r.pp, r.interleave) for r in runs if r.pp > 1}
    assert piped == {
        "megatron-core-gpt-70b": (2, 42),
        "megatron-core-gpt-119b": (4, 23),
        "megatron-core-gpt-177b": (6, 16),
        "megatron-core-gpt-314b": (8, 12),
        "megatron-core-gpt-462b": (16, 7),
    }
    for r in runs:
        layers = catalog.net_spec(r.net)["model"]["n_layers"]
        assert r.interleave == (layers // r.pp if r.pp > 1 else 1)
    with open(catalog.configs_dir() / "measurements" / "llm.csv", newline="") as f:
        notes = [
            row["notes"] for row in csv.DictReader(f) if row["source"] == "megatron-core-readme-2024-h100"
        ]
    cited = "Overlap P2P communication is disabled if not using the interleaved schedule"
    assert sum(cited in n for n in notes) == len(piped)


def test_fp8_runs_count_the_flops_their_summaries_print(shipped):
    """The summaries print model TFLOP/s per GPU beside tokens/s per GPU, so their ratio is the
    FLOPs one token costs by NVIDIA's count. The evaluator's model FLOPs (costs.llm.evaluator, forward and
    backward, no recomputation) agree within 0.6% (the printed TFLOP/s have 3 digits), except
    26.04.01's Llama 3 70B: its table prints 2.3% fewer FLOPs a token than 25.11's for the same
    model and sequence length (731 TFLOP/s at 1,664 tokens/s against 719 at 1,602), and NeMo
    24.07's rows, each run with a flash kernel (the zoo's Llama 3 specs; GPT-3 175B's rows by
    their attention column), whose printed FLOPs a token exceed the evaluator's by the causally
    masked half of the attention score and value matmuls that a flash kernel skips, 6 x layers x
    d_model x seq (forward and backward), as if counted without the mask: 711 TFLOP/s at 12,273
    tokens/s is 57.93 GFLOP a token for Llama 3 8B, 51.52 + 6.44 by this count (734 at 1,524 for
    70B: 481.6, 449.4 + 32.2; GPT-3 175B, 771 at 716: 1,076.8, 1,062.1 + 14.5)."""
    from costs.model import evaluate

    runs = _fp8(shipped)
    table = RunTable(runs, "modern")
    eff = catalog.efficiency(table.device_keys, table.link_keys)
    ratio = {}
    for g in table.groups:
        b = evaluate(g.costs, g.plans, table.devices, table.links, efficiency=eff)
        for j, i in enumerate(g.rows):
            r = runs[i]
            printed = FP8_RUNS[(r.source, r.net, r.gpus)][1] * 1e12 / r.value  # FLOPs a token
            per_token = b.model_flops[j] / b.samples[j] / r.seq_len
            if r.source == "nemo-24.07-h100-fp8" and measurements.kernel(r.net, r.attention) == "flash":
                m = catalog.net_spec(r.net)["model"]
                per_token += 6 * m["n_layers"] * m["d_model"] * r.seq_len  # the masked half
            ratio[(r.source, r.net, r.gpus)] = per_token / printed
    odd = ("megatron-bridge-26.04.01-h100-fp8", "llama3-70b", 64)
    assert 1.015 < ratio.pop(odd) < 1.03
    for key, x in ratio.items():
        assert abs(x - 1) < 0.006, key
