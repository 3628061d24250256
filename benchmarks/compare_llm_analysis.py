"""planner beside llm-analysis: error on the shipped transformer runs and plans scored per second.

llm-analysis (https://pypi.org/project/llm-analysis/0.2.2/, Apache-2.0) is an analytical model of
transformer training: its step time is the step's FLOPs (forward, twice that backward, plus the
recomputed forward) over tensor x pipeline GPUs at ``flops_efficiency`` x the GPU's peak. Each run
of configs/measurements/llm.csv is read through planner's own loader (so every metric becomes
samples per second as `planner validate` reads it) and handed to llm-analysis with the same
shapes (hidden size, layers, heads, key-value heads, feed-forward size, vocabulary), split (TP,
PP, DP, sequence parallelism, ZeRO stage, recomputation), micro-batch, micro-batches per step and
sequence length, on a GPU built from planner's catalog (configs/devices.toml and
configs/networks.toml: the vendor datasheets' dense peaks, memory, HBM and link bandwidths).

llm-analysis is run at two settings, neither tuned to the runs:
- its defaults: flops and HBM efficiency 1.0, which its README calls "the lower bound of training
  or inference latency";
- its README's assumption for training ("literature reports up to 0.5 for large scale model
  training ... 0.9 can be an aggressive target for memory efficiency"): 0.5 and 0.9.
(README section "How to Set FLOPS and Memory Efficiency" of llm-analysis 0.2.2, read 2026-11-24.)

planner's side is the default profile: its leave-one-source-out error per source (recorded in
configs/profiles/default.toml by `planner calibrate`: each source predicted by a fit without it)
and its in-sample error (the profile fitted on all the runs, as `planner validate` prints it).

Speed: the same list of llama3-8b and gpt3-175b plans (H100 SXM, bf16; GPUs x TP x PP x ZeRO x
recomputation x micro-batch x micro-batches per step), llm-analysis one call per plan, planner's
evaluator one vectorised call per net.

Run: pip install ".[compare]"  (or, beside a newer transformers: pip install --no-deps
llm-analysis==0.2.2 "fire<0.6" termcolor six), then python benchmarks/compare_llm_analysis.py
"""

from __future__ import annotations

import logging
import os
import sys
import time
from dataclasses import dataclass

for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, "1")  # one core, as benchmarks/bench_llm.py

import numpy as np  # noqa: E402

from costs.fit import calibration as cal  # noqa: E402
from planner import catalog  # noqa: E402
from planner.calibrate import fitting, measurements  # noqa: E402
from planner.calibrate.measurements import Run  # noqa: E402
from planner.calibrate.predict import RunTable  # noqa: E402
from planner.metrics.model import default_profile  # noqa: E402

try:
    from llm_analysis import analysis as la
    from llm_analysis import config as la_config
except ImportError:  # the optional extra `compare`
    la = la_config = None

VERSION = "0.2.2"
DEFAULTS = {"flops_efficiency": 1.0, "hbm_memory_efficiency": 1.0}  # llm_analysis/constant.py
README = {"flops_efficiency": 0.5, "hbm_memory_efficiency": 0.9}  # its README's training assumption
RECOMPUTE = {"": "NONE", "none": "NONE", "selective": "SELECTIVE", "full": "FULL"}
DTYPES = {"fp16": (16, 16), "bf16": (16, 16), "fp8": (8, 8)}  # (weight, activation) bits


@dataclass(frozen=True)
class Inputs:
    """What llm-analysis is given for one run: its four config objects and training() arguments."""

    model: object  # llm_analysis.config.ModelConfig
    gpu: object  # GPUConfig
    dtype: object  # DtypeConfig
    parallel: object  # ParallelismConfig
    training: dict  # keyword arguments of LLMAnalysis.training


def skip_reason(run: Run) -> str:
    """Why llm-analysis cannot express ``run`` ('' when it can)."""
    model = catalog.net_spec(run.net).get("model") or {}
    if model.get("moe") or run.ep > 1:
        return "mixture of experts: llm-analysis 0.2.2 counts one dense MLP's FLOPs per layer whatever the experts"
    if model.get("head_dim", model["d_model"] // model["n_heads"]) * model["n_heads"] != model["d_model"]:
        return "heads x head size differ from the hidden size: llm-analysis 0.2.2 cannot express it"
    if run.precision not in DTYPES:
        return f"precision {run.precision}: llm-analysis 0.2.2 has 16-, 8- and 4-bit GEMMs only"
    if run.tp > run.gpus_per_node:
        return "tensor parallelism across nodes: llm-analysis 0.2.2 refuses tp_size > GPUs per node"
    return ""


def gpu_config(device: str, network: str):
    """llm-analysis's GPUConfig from planner's catalog (datasheet peaks, memory and bandwidths)."""
    info = catalog.device(device)
    d, links = info.device, catalog.networks()
    intra = links[d.intra_link].link
    peak = d.peak_flops
    return la_config.GPUConfig(
        name=device,
        mem_per_GPU_in_GB=info.raw["memory_gb"],  # GiB: llm-analysis multiplies by 1024**3
        hbm_bandwidth_in_GB_per_sec=d.mem_bandwidth / 1e9,
        intra_node_bandwidth_in_GB_per_sec=intra.bandwidth / 1e9,
        intra_node_min_message_latency=intra.latency,
        peak_fp16_TFLOPS=peak["bf16"] / 1e12,
        # 8-bit GEMMs run at the FP8 tensor-core peak where the datasheet gives one
        peak_i8_TFLOPS=peak["fp8"] / 1e12 if "fp8" in peak else None,
        inter_node_bandwidth_in_GB_per_sec=links[network].link.bandwidth / 1e9,
    )


def inputs(run: Run) -> Inputs:
    """llm-analysis's inputs for one measured run (see :func:`skip_reason` first)."""
    m = catalog.net_spec(run.net)["model"]
    seq = run.seq_len or m["seq_len"]
    model = la_config.ModelConfig(
        name=run.net,
        num_layers=m["n_layers"],
        n_head=m["n_heads"],
        hidden_dim=m["d_model"],
        vocab_size=m["vocab"],
        max_seq_len=max(seq, m.get("max_positions", seq)),
        num_key_value_heads=m.get("n_kv_heads", m["n_heads"]),
        ffn_embed_dim=m["d_ff"],
        expansion_ratio=m["d_ff"] / m["d_model"],  # given, so a 3.5x SwiGLU width is accepted
        model_type=m.get("family"),
    )
    weight_bits, act_bits = DTYPES[run.precision]
    dtype = la_config.DtypeConfig(
        name=f"w{weight_bits}a{act_bits}e16", weight_bits=weight_bits, activation_bits=act_bits
    )
    dp = run.gpus // (run.tp * run.pp)
    parallel = la_config.ParallelismConfig(
        tp_size=run.tp, pp_size=run.pp, dp_size=dp, sp_size=run.tp if run.sp else 1
    )
    training = dict(
        batch_size_per_gpu=run.batch_per_gpu,
        gradient_accumulation_steps=run.accumulation,
        global_batch_size=run.batch_per_gpu * run.accumulation * dp,
        seq_len=seq,
        activation_recomputation=la.ActivationRecomputation[RECOMPUTE[run.recompute]],
        ds_zero=la.DSZeRO(run.zero),
        flash_attn=m.get("attention") == "flash",
        mlp_gated_linear_units=m.get("activation") == "swiglu",
    )
    return Inputs(model, gpu_config(run.device, run.network), dtype, parallel, training)


def samples_per_s(x: Inputs, efficiency: dict) -> float:
    """llm-analysis's predicted throughput of one run, sequences per second over all GPUs."""
    analysis = la.LLMAnalysis(x.model, x.gpu, x.dtype, x.parallel, **efficiency)
    out = analysis.training(**x.training)
    return out["global_batch_size"] / out["latency_per_iter"]


def quiet() -> None:
    """llm-analysis logs every call at INFO; keep its warnings about memory out of the tables."""
    logging.getLogger("llm_analysis").setLevel(logging.ERROR)
    la.logger.setLevel(logging.ERROR)


def llm_analysis_errors(runs: list[Run]) -> tuple[dict, dict, list[str]]:
    """log(predicted / measured) per run index for each llm-analysis setting, and skip notes."""
    logs = {"defaults": {}, "readme": {}}
    skipped = []
    for i, run in enumerate(runs):
        reason = skip_reason(run)
        if reason:
            skipped.append(f"{run.source} row {run.row} ({run.net}): {reason}")
            continue
        x = inputs(run)
        for key, eff in (("defaults", DEFAULTS), ("readme", README)):
            logs[key][i] = float(np.log(samples_per_s(x, eff) / run.samples_per_s))
    return logs["defaults"], logs["readme"], skipped


def planner_errors(runs: list[Run]) -> tuple[np.ndarray, dict]:
    """planner's in-sample log(predicted / measured) per run, and held-out median |error| per source."""
    table = RunTable(runs, "modern")
    in_sample = np.log(fitting.predict(table, default_profile()) / table.measured)
    meta = default_profile().meta
    held = dict(zip(meta["held_out_sources"], meta["held_out_median_ape"], strict=True))
    return in_sample, held


def _pct(v: float | None, sign: bool = False) -> str:
    if v is None or not np.isfinite(v):
        return "-"
    return f"{v:+.1f}%" if sign else f"{v:.1f}%"


def held_out_efficiency(logs: dict, runs: list[Run]) -> dict:
    """log(predicted / measured) per run with llm-analysis's one flops efficiency fitted on the
    other sources: each source's runs are shifted by the median over the other sources of their
    median log error (one vote per source; step time is proportional to 1 / efficiency)."""
    by_source: dict[str, list[int]] = {}
    for i in logs:
        by_source.setdefault(runs[i].source, []).append(i)
    medians = {s: float(np.median([logs[i] for i in idx])) for s, idx in by_source.items()}
    out = {}
    for source, idx in by_source.items():
        shift = np.median([m for s, m in medians.items() if s != source])
        out.update({i: logs[i] - shift for i in idx})
    return out


def fitted_efficiency(readme: dict, runs: list[Run]) -> float:
    """The one flops efficiency that centres llm-analysis on all sources (one vote per source),
    from its log errors at the README setting."""
    medians: dict[str, list[float]] = {}
    for i, r in readme.items():
        medians.setdefault(runs[i].source, []).append(r)
    shift = np.median([np.median(v) for v in medians.values()])
    return README["flops_efficiency"] * float(np.exp(shift))


def _summary(logs: dict, idx: list[int]) -> dict:
    return cal.summary(np.array([logs[i] for i in idx if i in logs]))


def table(runs: list[Run]) -> tuple[list[str], list[str], float]:
    """The Markdown table (one line per source, then all runs), the skip notes and the one
    efficiency that centres llm-analysis on all sources."""
    in_sample, held = planner_errors(runs)
    defaults, readme, skipped = llm_analysis_errors(runs)
    fitted = held_out_efficiency(readme, runs)
    sources = list(dict.fromkeys(r.source for r in runs))
    lines = [
        "| source | runs (llm-analysis) | planner held out | planner in sample | llm-analysis "
        "defaults (1.0) | bias | llm-analysis README (0.5) | bias | llm-analysis, efficiency "
        "fitted on the other sources |",
        "|" + "---|" * 9,
    ]
    groups = [(s, [i for i, r in enumerate(runs) if r.source == s]) for s in sources]
    groups.append(("all runs", list(range(len(runs)))))
    held["all runs"] = default_profile().meta.get("median_ape_transformer", float("nan"))
    for source, idx in groups:
        ours = cal.summary(in_sample[idx])
        d, r, f = _summary(defaults, idx), _summary(readme, idx), _summary(fitted, idx)
        lines.append(
            f"| {source} | {len(idx)} ({d['n']}) | {_pct(held.get(source))} | {_pct(ours['median_ape'])} | "
            f"{_pct(d['median_ape'])} | {_pct(d['bias'], True)} | {_pct(r['median_ape'])} | "
            f"{_pct(r['bias'], True)} | {_pct(f['median_ape'])} |"
        )
    return lines, skipped, fitted_efficiency(readme, runs)


# ---- speed: the same plans through both tools ------------------------------------------------

SPEED_NETS = ("llama3-8b", "gpt3-175b")
SPEED_AXES = dict(
    workers=[64, 128, 256, 512, 1024],
    tp=[1, 2, 4, 8],
    pp=[1, 2, 4, 8],
    zero=[0, 1, 2, 3],
    recompute=["none", "full"],
    batch=[1, 2, 4],
    accumulation=[8, 32],
)


def speed_plans() -> list[dict]:
    """Every combination of SPEED_AXES (3,840 plans per net), H100 SXM in nodes of 8, bf16."""
    mesh = np.meshgrid(*(np.arange(len(v)) for v in SPEED_AXES.values()), indexing="ij")
    idx = np.stack([m.ravel() for m in mesh], axis=1)
    keys = list(SPEED_AXES)
    return [{k: SPEED_AXES[k][j] for k, j in zip(keys, row)} for row in idx]


def _as_run(net: str, p: dict) -> Run:
    return Run(
        row=0, source="speed", net=net, device="H100_SXM", precision="bf16", gpus=p["workers"],
        gpus_per_node=8, network="ib_ndr", batch_per_gpu=p["batch"], scheme="ring",
        metric="samples_per_s", value=1.0, accumulation=p["accumulation"],
        seq_len=catalog.net_spec(net)["model"]["seq_len"], tp=p["tp"], pp=p["pp"],
        zero=p["zero"], recompute=p["recompute"],
    )  # fmt: skip


def speed(net: str) -> tuple[int, float, float]:
    """(plans, llm-analysis plans/s, planner plans/s) on the same plans of ``net``."""
    runs = [_as_run(net, p) for p in speed_plans()]
    table_ = RunTable(runs, "modern")  # planner's plan columns, built once as the optimizer does
    profile = default_profile()
    fitting.predict(table_, profile)  # warm: shard costs built and cached
    best = np.inf
    for _ in range(3):
        table_._memo.clear()  # score every plan again, not from the cache
        t0 = time.perf_counter()
        fitting.predict(table_, profile)
        best = min(best, time.perf_counter() - t0)
    xs = [inputs(r) for r in runs]
    t0 = time.perf_counter()
    for x in xs:
        samples_per_s(x, README)
    t_la = time.perf_counter() - t0
    return len(runs), len(runs) / t_la, len(runs) / best


def main() -> int:
    if la is None:
        print(f"llm-analysis is not installed: pip install '.[compare]' (llm-analysis=={VERSION}); skipped")
        return 0
    quiet()
    runs = measurements.load(catalog.configs_dir() / "measurements" / "llm.csv")
    lines, skipped, efficiency = table(runs)
    print(f"Transformer runs of configs/measurements/llm.csv: {len(runs)}; median |error| of throughput")
    print("\n".join(lines))
    print(f"\nllm-analysis's one efficiency fitted on all sources (in sample): {efficiency:.3f}")
    print(f"\nSkipped by llm-analysis ({len(skipped)}):")
    for s in skipped:
        print(f"  {s}")
    print()
    for net in SPEED_NETS:
        n, la_rate, ours = speed(net)
        print(f"{net}: {n:,} plans; llm-analysis {la_rate:,.0f} plans/s, planner {ours:,.0f} plans/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
