"""`planner profile`'s spec-to-PyTorch builder (CPU): every layer type of the zoo, the
parameter counts of `planner summary`, the modelled shapes, the implied ReLUs, attention."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch", reason="planner profile needs PyTorch: pip install '.[profile]'")

from costs.specs import layers  # noqa: E402
from planner import catalog  # noqa: E402
from planner.profile import nets  # noqa: E402
from planner.profile.builder import SpecModel, batch, param_count  # noqa: E402
from planner.report.summary import summarize  # noqa: E402
from planner.request import defaults  # noqa: E402

CNNS = sorted(
    set(catalog.zoo())
    - set(catalog.zoo_transformers())
    - {n for n, spec in catalog.zoo_info().items() if "vision" in spec}
)
# The builder has no module for multi-head latent attention (DeepSeek-V3): those nets are refused
MLA_NETS = sorted(n for n in catalog.zoo_transformers() if catalog.net_spec(n)["model"].get("mla"))
TRANSFORMERS = sorted(set(catalog.zoo_transformers()) - set(MLA_NETS))

# A small net with every CNN layer type (odd sizes: TensorFlow's SAME pads one more row after).
EVERY_CNN_TYPE = {
    "name": "every-cnn-type",
    "layers": {
        "data": {"type": "Input", "parents": [], "tensor": [2, 15, 15, 3]},
        "conv": {
            "type": "Convolution",
            "parents": ["data"],
            "filter": [3, 3, 3, 8],
            "strides": [1, 2, 2, 1],
            "padding": "SAME",
        },
        "bn": {"type": "BatchNorm", "parents": ["conv"]},
        "lrn": {
            "type": "Generic",
            "parents": ["bn"],
            "operation": "LRN",
            "local_size": 5,
            "alpha": 1e-4,
            "beta": 0.75,
        },
        "pool": {
            "type": "Pooling",
            "parents": ["lrn"],
            "ksize": [1, 3, 3, 1],
            "strides": [1, 2, 2, 1],
            "padding": "SAME",
        },
        "a": {"type": "Convolution", "parents": ["pool"], "filter": [1, 1, 8, 4], "padding": "SAME"},
        "b": {"type": "Convolution", "parents": ["pool"], "filter": [3, 3, 8, 4], "padding": "SAME"},
        "cat": {"type": "Concatenate", "parents": ["a", "b"], "dim": 3},
        "c": {"type": "Convolution", "parents": ["cat"], "filter": [1, 1, 8, 8], "padding": "SAME"},
        "sum": {"type": "Elementwise", "parents": ["c", "pool"], "operation": "sum"},
        "up": {"type": "UpSampling2D", "parents": ["sum"], "ksize": [1, 2, 2, 1]},
        "tanh": {"type": "Tanh", "parents": ["up"]},
        "avg": {
            "type": "AvgPool",
            "parents": ["tanh"],
            "ksize": [1, 2, 2, 1],
            "strides": [1, 2, 2, 1],
            "padding": "VALID",
        },
        "flat": {"type": "Reshape", "parents": ["avg"], "output_shape": [-1, 128]},
        "fc": {"type": "InnerProduct", "parents": ["flat"], "num_outputs": 64},
        "relu": {"type": "ReLU", "parents": ["fc"]},
        "drop": {"type": "Dropout", "parents": ["relu"], "dropout_keep_prob": 0.5},
        "fc2": {"type": "InnerProduct", "parents": ["drop"], "num_outputs": 10},
        "prob": {"type": "Softmax", "parents": ["fc2"], "num_classes": 10},
    },
}


def _torch_shape(shape) -> tuple:
    """The spec's per-sample (H, W, C) as PyTorch's (C, H, W)."""
    return (shape[2], shape[0], shape[1]) if len(shape) == 3 else tuple(shape)


def _shapes_seen(model: SpecModel, x, y) -> list[tuple]:
    seen = []
    hooks = [n.register_forward_hook(lambda m, a, out: seen.append(tuple(out.shape))) for n in model.nodes]
    model(x, y)
    for h in hooks:
        h.remove()
    return seen


def _check_shapes(net, n: int, device) -> None:
    model = SpecModel(net).to(device)
    x, y = batch(net, n, device, False)
    seen = _shapes_seen(model, x, y)
    for s, got in zip(net.layers[:-1], seen[:-1]):  # the last layer is the loss (a scalar)
        assert got == (n, *_torch_shape(s.out_shape)), s.name
    assert seen[-1] == ()


@pytest.mark.parametrize("name", CNNS)
def test_cnn_parameters_and_shapes_equal_the_spec(name):
    """Every zoo CNN, built on the meta device (no memory, no arithmetic): the parameters of
    `planner summary` and, layer by layer, the spec's output shapes."""
    net = nets.load(name)
    with torch.device("meta"):
        model = SpecModel(net)
    assert param_count(model) == summarize(name, None, defaults.RULES)[1]["params"]
    _check_shapes(net, 2, torch.device("meta"))


@pytest.mark.parametrize("name", TRANSFORMERS)
def test_transformer_parameters_equal_summary(name):
    """Full size on the meta device (GPT-3 175B included): the count of `planner summary`."""
    net = nets.load(name)
    with torch.device("meta"):
        model = SpecModel(net)
    assert param_count(model) == summarize(name, None, defaults.RULES)[1]["params"]


def _narrow(name: str) -> nets.Overrides:
    """Two layers, a small vocabulary and width; GQA, MoE, flash/standard and causal kept."""
    model = catalog.zoo_info()[name]["model"]
    kv = 2 if model.get("n_kv_heads", model["n_heads"]) < model["n_heads"] else 4
    shape = {"d_model": 64, "n_heads": 4, "n_kv_heads": kv, "head_dim": 16, "d_ff": 96}
    if "moe" in model:
        shape = shape | {"moe": {"n_experts": 4, "top_k": 2}}
    return nets.Overrides(seq_len=16, n_layers=2, vocab=500, model=tuple(shape.items()))


@pytest.mark.parametrize("name", TRANSFORMERS)
def test_narrow_transformer_trains_on_cpu(name):
    """A narrow two-layer copy runs forward and backward; its parameters are the spec's."""
    net = nets.load(name, _narrow(name))
    model = SpecModel(net)
    assert param_count(model) == sum(layers.params(s) for s in net.layers)
    _check_shapes(net, 2, torch.device("cpu"))
    x, y = batch(net, 2, "cpu", False)
    loss = model(x, y)
    loss.backward()
    assert torch.isfinite(loss) and 5.0 < float(loss.detach()) < 8.0  # about ln(500) = 6.2 at initialisation
    assert all(p.grad is not None for n, p in model.named_parameters() if "experts" not in n)


@pytest.mark.parametrize(
    "name", ["alexnet", "googlenet", "dcgan_generator", "dcgan_discriminator", "resnet50"]
)
def test_cnn_trains_on_cpu(name):
    """A real forward and backward at batch 2 (LRN, deconvolution, sigmoid loss, residuals)."""
    net = nets.load(name)
    model = SpecModel(net)
    x, y = batch(net, 2, "cpu", False)
    loss = model(x, y)
    loss.backward()
    assert torch.isfinite(loss)
    assert all(p.grad is not None for p in model.parameters())


def test_every_cnn_layer_type(tmp_path):
    path = tmp_path / "every.json"
    path.write_text(json.dumps(EVERY_CNN_TYPE))
    net = nets.load(str(path))
    kinds = {s.type for s in net.layers}
    zoo = {s.type for name in CNNS for s in nets.load(name).layers}
    assert zoo <= kinds | {"Deconvolution", "Sigmoid"}  # those two: the DCGAN test above
    model = SpecModel(net)
    assert param_count(model) == sum(layers.params(s) for s in net.layers)
    _check_shapes(net, 2, torch.device("cpu"))
    x, y = batch(net, 2, "cpu", False)
    model(x, y).backward()


def test_implied_relus_follow_the_batchnorm():
    """ResNet-50: conv -> BN -> ReLU except before the residual sum, then a ReLU after it."""
    net = nets.load("resnet50")
    model = SpecModel(net)
    relu = {s.name: node.relu for s, node in zip(net.layers, model.nodes)}
    types = {s.name: s.type for s in net.layers}
    assert not any(relu[n] for n, t in types.items() if t == "Convolution")  # every conv has a BN
    assert all(relu[n] for n, t in types.items() if t == "Elementwise")
    bns = [n for n, t in types.items() if t == "BatchNorm"]
    # 53 BatchNorms; 16 blocks end in a BN feeding the sum, 4 projection shortcuts too
    assert sum(relu[n] for n in bns) == 53 - 16 - 4


@pytest.mark.parametrize("causal", [False, True])
def test_flash_and_standard_attention_agree(causal):
    """PyTorch's fused kernel and the materialised scores give the same output (GQA 4:2)."""
    from costs.specs.nodes import Layer, ShapedLayer
    from planner.profile.transformer import Attention

    spec = {"n_heads": 4, "n_kv_heads": 2, "head_dim": 8, "causal": causal}
    s = lambda flash: ShapedLayer(
        Layer("a", "Attention", ("x",), spec | {"flash": flash}), ((6, 64),), (6, 32)
    )  # noqa: E731
    qkv = torch.randn(3, 6, 64)
    torch.testing.assert_close(Attention(s(True))(qkv), Attention(s(False))(qkv), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", MLA_NETS)
def test_latent_attention_nets_are_refused_in_one_line(name):
    from costs.errors import UnsupportedError

    with pytest.raises(UnsupportedError, match="layer type 'MLA' cannot be profiled yet"):
        SpecModel(nets.load(name, _narrow(name)))
