"""A small hand-built transformer, device and links for the closed-form tests of the LLM
evaluator's terms (tests/test_llm_terms_*.py).

The device and links are fictitious, with round numbers, so that every communication and
memory term can be written down from its paper's formula: the tests assert the evaluator
against those formulas, computed here from the plan's own numbers, never through the helpers
of costs/llm/.
"""

from __future__ import annotations

from costs.hardware import PRECISIONS, Device, DeviceTable, Link, LinkTable
from costs.llm import evaluator as llm
from costs.modern.efficiency import Efficiency
from costs.modern.evaluator import Options
from costs.plans import plans
from costs.rules import MODERN
from costs.specs import coefficients
from costs.specs.graph import build_net
from costs.specs.transformer_spec import build_layers

BF16, FP32 = PRECISIONS.index("bf16"), PRECISIONS.index("fp32")
RING = 3  # costs.comm.schemes.SCHEME_NAMES: onetoall, tree, butterfly, ring

# One fictitious GPU (1 PFLOP/s at every precision, 2 TB/s, 80 GB) and two links: ``NET``
# between nodes (25 GB/s, 5 us) and ``NVL`` inside a node (200 GB/s, 1 us).
DEVICES = DeviceTable.of([Device("toy-gpu", {p: 1e15 for p in PRECISIONS}, 2e12, 1.5e9, 80e9)])
NET_BW, NET_LAT, NVL_BW, NVL_LAT = 25e9, 5e-6, 200e9, 1e-6
LINKS = LinkTable.of([Link("toy-net", NET_BW, NET_LAT), Link("toy-nvlink", NVL_BW, NVL_LAT)])
IDEAL = Efficiency.ideal(DEVICES, LINKS)
NO_BUCKETS = Options(optimizer="adam", bucket_bytes=0.0)  # nothing hides the data-parallel traffic

# A GPT-3-shaped layer (Korthikanti et al. 2022's: LayerNorm, GELU MLP of 4h, standard
# attention, dropout) at a small size: h = 512, a = 8 heads, 8 layers, 256 tokens.
GPT = dict(
    family="gpt3",
    d_model=512,
    n_layers=8,
    n_heads=8,
    d_ff=2048,
    vocab=1024,
    seq_len=256,
    activation="gelu",
    norm="layernorm",
    norm_position="pre",
    positional="learned",
    max_positions=256,
    tied=True,
    bias=True,
    dropout=True,
    causal=True,
    attention="standard",
    batch=1,
)


def model(**changes) -> dict:
    """The toy description with ``changes`` applied."""
    return {**GPT, **changes}


def net_costs(m: dict):
    """Per-layer cost coefficients of a transformer description under the modern rules."""
    net = build_net({"name": "toy", "model": m, "layers": build_layers(m)}, "toy", MODERN)
    return coefficients.build(net, MODERN)


def evaluate(m: dict, options: Options = NO_BUCKETS, efficiency: Efficiency = IDEAL, **columns):
    """(costs, breakdown): the LLM evaluator on plans of the toy GPU and links (inter-node link
    0, intra-node 1, bf16, ring unless ``columns`` say otherwise), at ideal efficiency unless
    given; ``columns`` broadcast like :func:`costs.plans.plans`."""
    costs = net_costs(m)
    cols = {**dict(device=0, network=0, intra_link=1, precision=BF16, scheme=RING), **columns}
    p = plans(costs.n_layers, **cols)
    return costs, llm.evaluate(costs, p, DEVICES, LINKS, efficiency=efficiency, options=options)


def ring_allreduce(nbytes, k, bw, lat):
    """A ring all-reduce of ``nbytes`` over ``k`` GPUs: 2(k-1)/k of the bytes per GPU and
    2(k-1) steps (Patarasuk and Yuan 2009; Thakur et al. 2005)."""
    return 0.0 if k == 1 else 2 * (k - 1) / k * nbytes / bw + 2 * (k - 1) * lat
