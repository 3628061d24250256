"""The shipped transformer measurements: loading, metric conversions, measurement nets, validation.

Reference figures are the sources' own: Megatron-LM's README (commit 152aab3, 2021-01-11) says its
GPT-3 175B example takes "around 32 seconds" an iteration of 1536 sequences on 1024 A100 at 138
teraFLOP/s per GPU; its 2021 table (commit 50a4b5f) gives the 1T model 502.0 aggregate petaFLOP/s
on 3072 GPUs and 1008.0 billion parameters; its 2024 H100 table (commit f2e5db4) gives 19.6
aggregate petaFLOP/s for the 1.7B model on 48 GPUs.
"""

from __future__ import annotations

import numpy as np
import pytest

from costs import layers
from costs.rules import MODERN
from costs.transformer_spec import build_layers
from planner import catalog
from planner.calibrate import commands, measurements
from planner.calibrate.fitting import predict
from planner.calibrate.predict import RunTable, predictable
from planner.metrics.model import default_profile

COUNTS = {"cnn.csv": 191, "transformer.csv": 105, "llm.csv": 20}


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
    gpt3 = _one(llm, net="gpt3-175b")
    assert 1536 / gpt3.samples_per_s == pytest.approx(32.0, rel=0.02)  # "around 32 seconds"
    one_t = _one(llm, net="megatron-1t")
    aggregate = one_t.samples_per_s * one_t.flops_per_sample / 1e15
    assert aggregate == pytest.approx(502.0, rel=0.005)
    core = _one(llm, net="megatron-core-gpt-1.7b")
    assert core.samples_per_s * core.flops_per_sample / 1e15 == pytest.approx(19.6, rel=0.005)


def test_model_parallel_split_is_the_published_one(shipped):
    """Every Megatron run: DP x micro-batch x micro-batches = the global batch in its notes."""
    for r in shipped["llm.csv"]:
        dp = r.gpus // (r.tp * r.pp)
        assert dp * r.tp * r.pp == r.gpus
        assert r.recompute in ("full", "")
    t1 = _one(shipped["llm.csv"], net="megatron-1t")
    assert (t1.tp, t1.pp, t1.gpus // 512, t1.batch_per_gpu * 6 * t1.accumulation) == (8, 64, 6, 3072)


def test_measurement_nets_resolve_but_stay_out_of_the_zoo():
    extra = catalog.measurement_nets()
    assert len(extra) == 19 and not set(extra) & set(catalog.zoo())
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
    ],
)
def test_measurement_net_parameters_match_the_tables(name, published, digits):
    net = catalog.load_net(name, "planner")
    assert abs(sum(layers.params(s) for s in net.layers) - published) <= digits


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


def test_model_parallel_runs_are_set_aside_in_one_place(shipped):
    kept, note = predictable(shipped["llm.csv"])
    assert [r.net for r in kept] == ["megatron-gpt-1.7b", "megatron-core-gpt-1.7b"]
    assert note == "18 model-parallel runs skipped: the evaluator does not model TP/PP yet"
    assert predictable(shipped["cnn.csv"])[1] == ""


def test_validate_reports_the_transformer_sources():
    out = commands.run_validate([], None).text
    for source in ("nvidia-dle-bert-pyt-a100", "nvidia-dle-bert-tf-dgx2", "megatron-lm-readme-2021-a100"):
        assert source in out
    assert "18 model-parallel runs skipped: the evaluator does not model TP/PP yet" in out


def test_gpt_data_parallel_run_error_band(shipped):
    """megatron-gpt-1.7b, TP = PP = 1 on 32 A100: the default profile (fitted on CNNs) predicts
    1.88x the measured sequences/s (measured 2026-11-23). Part of it is known: the run recomputed
    every activation (a third more compute than the evaluator counts); the rest is the evaluator's
    optimism for these GEMMs. The band pins the current error so a change is noticed."""
    run = _one(shipped["llm.csv"], net="megatron-gpt-1.7b")
    ratio = predict(RunTable([run], "modern"), default_profile())[0] / run.samples_per_s
    assert 1.7 < ratio < 2.05
