"""Reading measured runs (planner.calibrate.measurements): good rows, and one error per bad row."""

from __future__ import annotations

import numpy as np
import pytest

from planner.calibrate import measurements as m
from planner.errors import BadInput

HEADER = (
    "source,net,device,precision,gpus,gpus_per_node,network,batch_per_gpu,scheme,metric,value,accumulation"
)
GOOD = [
    "a,resnet50,A100_80GB,bf16,8,8,,256,,samples_per_s,21000,",
    "a,resnet50,A100_80GB,bf16,16,8,ib_hdr,256,ring,iteration_ms,200,2",
    "b,alexnet,P100,fp32,4,4,,128,ps,samples_per_s,3000,1",
]


def write(tmp_path, lines, header=HEADER):
    p = tmp_path / "runs.csv"
    p.write_text("\n".join([header, *lines]) + "\n")
    return p


def test_good_rows(tmp_path):
    runs = m.load(write(tmp_path, GOOD))
    assert [r.row for r in runs] == [1, 2, 3]
    one, two, three = runs
    assert one.scheme == "ring" and one.network == "nvlink3"  # one node: the device's own link
    assert two.network == "ib_hdr" and two.accumulation == 2
    # 16 GPUs x 256 samples x 2 microbatches in 200 ms
    assert two.samples_per_s == pytest.approx(16 * 256 * 2 / 0.2)
    assert three.scheme == "onetoall"  # a parameter server


@pytest.mark.parametrize(
    ("line", "column", "says"),
    [
        ("a,resnet5,A100_80GB,bf16,8,8,,256,,samples_per_s,1,", "net", "unknown net 'resnet5'"),
        ("a,resnet50,A100,bf16,8,8,,256,,samples_per_s,1,", "device", "unknown device 'A100'"),
        ("a,resnet50,P100,bf16,8,8,,256,,samples_per_s,1,", "precision", "has no bf16 peak"),
        ("a,resnet50,A100_80GB,bf16,12,8,ib_hdr,256,,samples_per_s,1,", "gpus_per_node", "whole nodes"),
        ("a,resnet50,A100_80GB,bf16,16,8,,256,,samples_per_s,1,", "network", "missing value"),
        ("a,resnet50,A100_80GB,bf16,16,8,ib_xyz,256,,samples_per_s,1,", "network", "unknown link"),
        ("a,resnet50,A100_80GB,bf16,8,8,,0,,samples_per_s,1,", "batch_per_gpu", "below 1"),
        ("a,resnet50,A100_80GB,bf16,8,8,,256,mesh,samples_per_s,1,", "scheme", "unknown scheme"),
        ("a,resnet50,A100_80GB,bf16,8,8,,256,,images,1,", "metric", "unknown metric"),
        ("a,resnet50,A100_80GB,bf16,8,8,,256,,samples_per_s,,", "value", "missing value"),
        ("a,resnet50,A100_80GB,bf16,8,8,,256,,samples_per_s,nan,", "value", "not a positive"),
        ("a,resnet50,A100_80GB,bf16,8,8,,256,,samples_per_s,-3,", "value", "not a positive"),
        (",resnet50,A100_80GB,bf16,8,8,,256,,samples_per_s,1,", "source", "missing value"),
    ],
)
def test_bad_row_names_row_and_column(tmp_path, line, column, says):
    with pytest.raises(BadInput) as err:
        m.load(write(tmp_path, [GOOD[0], line]))
    msg = str(err.value)
    assert f"row 2, column '{column}'" in msg and says in msg
    assert "\n" not in msg


def test_bad_files(tmp_path):
    with pytest.raises(BadInput, match="missing column"):
        m.load(write(tmp_path, GOOD, header=HEADER.replace("metric,", "")))
    with pytest.raises(BadInput, match="only a header"):
        m.load(write(tmp_path, []))
    with pytest.raises(BadInput, match="No such file"):
        m.load(tmp_path / "absent.csv")


LLM_HEADER = HEADER + ",seq_len,tp,pp,recompute,flops_counting"
LLM_GOOD = (
    "m,megatron-gpt-1.7b,A100_80GB,fp16,32,8,ib_hdr,16,ring,tflops_per_gpu,137,1,2048,1,1,full,megatron-ptdp"
)


def test_model_parallel_and_flop_columns(tmp_path):
    lines = [
        LLM_GOOD,
        "m,gpt3-175b,A100_80GB,fp16,1024,8,ib_hdr,1,ring,tflops_per_gpu,138,192,2048,8,16,full,megatron-ptdp",
        "t,bert-large,A100_80GB,fp16,8,8,,32,ring,tokens_per_s,81920,4,512,,,,",
        "t,bert-large,A100_80GB,fp16,16,8,ib_hdr,32,ring,iteration_ms,1000,4,512,2,1,,",
    ]
    dp, mp, tokens, two = m.load(write(tmp_path, lines, LLM_HEADER))
    # 96 s l h^2 (1 + s/6h + V/16lh) FLOPs a sequence (Narayanan et al. 2021 eq. 3)
    s, n, h, v = 2048, 24, 2304, 51200
    per_seq = 96 * s * n * h * h * (1 + s / (6 * h) + v / (16 * n * h))
    assert dp.samples_per_s == pytest.approx(137e12 * 32 / per_seq)
    assert (dp.tp, dp.pp, dp.recompute, dp.model_parallel) == (1, 1, "full", False)
    assert (mp.tp, mp.pp, mp.model_parallel) == (8, 16, True)
    assert tokens.samples_per_s == pytest.approx(81920 / 512) and tokens.flops_per_sample is None
    # tp 2: 8 data-parallel replicas of 32 sequences, 4 micro-batches, in one second
    assert two.samples_per_s == pytest.approx(8 * 32 * 4)


@pytest.mark.parametrize(
    ("line", "column", "says"),
    [
        (LLM_GOOD.replace(",megatron-ptdp", ","), "flops_counting", "missing value"),
        (LLM_GOOD.replace(",megatron-ptdp", ",6nd"), "flops_counting", "valid: megatron-core, megatron-ptdp"),
        (LLM_GOOD.replace(",full,", ",some,"), "recompute", "valid: full, none, selective"),
        (LLM_GOOD.replace(",1,2048,1,1,", ",1,,1,1,"), "seq_len", "needs the sequence length"),
        (LLM_GOOD.replace(",1,2048,1,1,", ",1,2048,3,1,"), "pp", "tp x pp = 3"),
        (LLM_GOOD.replace("megatron-gpt-1.7b", "resnet50"), "net", "needs a transformer net"),
        (LLM_GOOD.replace("megatron-gpt-1.7b", "llama3-8b"), "flops_counting", "GELU feed-forward of 4"),
    ],
)
def test_bad_llm_row_names_row_and_column(tmp_path, line, column, says):
    with pytest.raises(BadInput) as err:
        m.load(write(tmp_path, [LLM_GOOD, line], LLM_HEADER))
    assert f"row 2, column '{column}'" in str(err.value) and says in str(err.value)


SHARDED_HEADER = HEADER + ",seq_len,tp,pp,zero,sp"
SHARDED = "f,llama3-8b,H100_SXM,bf16,64,8,ib_ndr,2,ring,tokens_per_s_per_gpu,5000,1,8192,1,1,3,"


def test_zero_sp_and_per_gpu_tokens(tmp_path):
    lines = [SHARDED, "f,llama3-70b,H100_SXM,bf16,64,8,ib_ndr,1,ring,tokens_per_s,1e5,8,8192,4,4,1,yes"]
    fsdp, mp = m.load(write(tmp_path, lines, SHARDED_HEADER))
    # 5,000 tokens/s on each of 64 GPUs, 8,192 tokens a sequence
    assert fsdp.samples_per_s == pytest.approx(5000 * 64 / 8192)
    assert (fsdp.zero, fsdp.sp) == (3, False)
    assert (mp.zero, mp.sp, mp.tp) == (1, True, 4)
    default = m.load(write(tmp_path, GOOD))[0]
    assert (default.zero, default.sp) == (0, False)


@pytest.mark.parametrize(
    ("line", "column", "says"),
    [
        (SHARDED.replace(",3,", ",4,"), "zero", "valid: 0, 1, 2, 3"),
        (SHARDED.replace(",3,", ",-1,"), "zero", "below 0"),
        (SHARDED + "maybe", "sp", "valid: no, yes"),
        (SHARDED.replace(",8192,", ",,"), "seq_len", "needs the sequence length"),
    ],
)
def test_bad_sharded_row_names_row_and_column(tmp_path, line, column, says):
    with pytest.raises(BadInput) as err:
        m.load(write(tmp_path, [SHARDED, line], SHARDED_HEADER))
    assert f"row 2, column '{column}'" in str(err.value) and says in str(err.value)


def test_zero_and_sp_reach_the_predicted_plans(tmp_path):
    from planner.calibrate.predict import RunTable

    lines = [
        SHARDED,
        SHARDED.replace(",3,", ",0,"),
        "f,llama3-70b,H100_SXM,bf16,64,8,ib_ndr,1,ring,tokens_per_s,1e5,8,8192,4,4,1,yes",
    ]
    table = RunTable(m.load(write(tmp_path, lines, SHARDED_HEADER)), "modern")
    zero = np.concatenate([g.plans.zero for g in table.groups])
    sp = np.concatenate([g.plans.sp for g in table.groups])
    assert sorted(zero.tolist()) == [0, 1, 3] and sorted(sp.tolist()) == [False, False, True]


def test_transformer_runs_are_scored_with_adam_and_cnns_with_momentum(tmp_path):
    """Megatron, FSDP and BERT runs train with Adam: the fit scores their optimizer step so."""
    from costs.model import evaluate
    from costs.modern.evaluator import Options
    from planner.calibrate import fitting
    from planner.calibrate.predict import RunTable

    table = RunTable(
        m.load(write(tmp_path, [SHARDED], SHARDED_HEADER)) + m.load(write(tmp_path, GOOD)), "modern"
    )
    got = fitting.predict(table)
    eff = fitting.catalog.efficiency(table.device_keys, table.link_keys)
    for g in table.groups:
        want = {"adam" if g.transformer else "momentum"}
        scored = {
            opt
            for opt in ("sgd", "momentum", "adam")
            if np.allclose(
                got[g.rows],
                evaluate(
                    g.costs, g.plans, table.devices, table.links, efficiency=eff, options=Options(opt)
                ).throughput,
            )
        }
        assert scored == want, g.costs.net.name
    assert sum(g.transformer for g in table.groups) == 1


MOE_HEADER = HEADER + ",seq_len,tp,pp,zero,ep"
MOE_PP = "f,mixtral-8x7b,H100_SXM,bf16,64,8,ib_ndr,1,ring,tokens_per_s_per_gpu,3000,1,4096,1,4,1,8"
MOE_EP = "f,mixtral-8x7b,H100_SXM,bf16,64,8,ib_ndr,1,ring,tokens_per_s_per_gpu,3000,1,4096,1,1,3,{ep}"


def test_expert_parallel_size_reaches_the_predicted_plans(tmp_path):
    from planner.calibrate.predict import RunTable, predictable

    runs = m.load(write(tmp_path, [MOE_PP, MOE_EP.format(ep=8), MOE_EP.format(ep="")], MOE_HEADER))
    assert [r.ep for r in runs] == [8, 8, 1]
    assert m.load(write(tmp_path, GOOD))[0].ep == 1
    table = RunTable(runs, "modern")
    assert sorted(np.concatenate([g.plans.ep for g in table.groups]).tolist()) == [1, 8, 8]
    # PALEO's rule sets do not model expert parallelism: the split runs are set aside
    kept, note = predictable(runs, "paleo-2018")
    assert kept == runs[2:] and note.startswith("2 model-parallel runs skipped")


def test_expert_parallel_size_must_divide_the_data_parallel_group(tmp_path):
    # 64 GPUs in 4 pipeline stages leave 16 data-parallel replicas: 16 % 6 != 0
    with pytest.raises(BadInput) as err:
        m.load(write(tmp_path, [MOE_PP, MOE_PP[:-1] + "6"], MOE_HEADER))
    assert "row 2, column 'ep'" in str(err.value) and "data-parallel size 16" in str(err.value)


def test_selective_recomputation_needs_a_net_without_flash_attention(tmp_path):
    """As `planner estimate` refuses it: a flash kernel keeps no scores to recompute."""
    with pytest.raises(BadInput) as err:
        m.load(write(tmp_path, [SHARDED + ",", SHARDED + ",selective"], SHARDED_HEADER + ",recompute"))
    assert "row 2, column 'recompute'" in str(err.value) and "valid: none, full" in str(err.value)
    ok = LLM_GOOD.replace(",full,", ",selective,")  # Megatron GPT 1.7B: standard attention
    assert m.load(write(tmp_path, [ok], LLM_HEADER))[0].recompute == "selective"


VP_HEADER = HEADER + ",seq_len,tp,pp,interleave"
# Llama 3 70B's 80 layers in 8 stages of 5 virtual stages each (Megatron-Bridge's H100 FP8 split)
VP = "f,llama3-70b,H100_SXM,bf16,64,8,ib_ndr,1,ring,tokens_per_s_per_gpu,1600,64,8192,4,8,{v}"


def test_interleave_is_read_and_defaults_to_one(tmp_path):
    runs = m.load(write(tmp_path, [VP.format(v=5), VP.format(v=""), VP.format(v=1)], VP_HEADER))
    assert [r.interleave for r in runs] == [5, 1, 1]
    assert m.load(write(tmp_path, GOOD))[0].interleave == 1


@pytest.mark.parametrize(
    ("line", "column", "says"),
    [
        (VP.format(v=0), "interleave", "0 is below 1"),
        (VP.format(v="two"), "interleave", "'two' is not a whole number"),
        # no pipeline to interleave: 64 GPUs as TP 4 x DP 16
        (VP.format(v=2).replace(",4,8,2", ",4,1,2"), "interleave", "need pipeline parallelism (pp > 1)"),
    ],
)
def test_bad_interleave_names_row_and_column(tmp_path, line, column, says):
    with pytest.raises(BadInput) as err:
        m.load(write(tmp_path, [VP.format(v=5), line], VP_HEADER))
    assert f"row 2, column '{column}'" in str(err.value) and says in str(err.value)


def test_interleave_reaches_the_predicted_plans(tmp_path):
    from planner.calibrate import fitting
    from planner.calibrate.predict import RunTable

    runs = m.load(write(tmp_path, [VP.format(v=5), VP.format(v="")], VP_HEADER))
    table = RunTable(runs, "modern")
    assert sorted(np.concatenate([g.plans.interleave for g in table.groups]).tolist()) == [1, 5]
    # the interleaved schedule shrinks the pipeline bubble (p - 1) / v: the same run predicts faster
    plain, interleaved = fitting.predict(table)[[1, 0]]
    assert interleaved > plain
