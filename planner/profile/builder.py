"""A ``torch.nn.Module`` built from planner's own shaped net (imports torch).

One submodule per spec layer, run in the spec's topological order, so every layer can be
timed on its own (:mod:`planner.profile.hooks`) and the measured net is the modelled one:
the same shapes and the same parameter count as ``planner summary``. The ReLUs that PALEO's
specs leave implicit run where the modern rules count them (:func:`costs.modern.roofline.implied_activations`),
after the BatchNorm that follows a layer when one does. The loss is the spec's last layer:
Softmax (cross-entropy over the classes), CrossEntropy (over the vocabulary, per token) or a
final Sigmoid (binary cross-entropy with logits); random labels stand in for data.
"""

from __future__ import annotations

from costs.errors import UnsupportedError
from costs.modern.roofline import implied_activations
from costs.specs.graph import Net
from costs.specs.nodes import ShapedLayer, prod
from planner.profile import cnn, lazy, transformer


def _defined() -> dict:
    """This module's names, defined on first use: PyTorch, the optional extra of `planner
    profile`, is imported here and not when planner starts."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    LOSSES = ("Softmax", "CrossEntropy", "Sigmoid")

    class Node(nn.Module):
        """One spec layer: its module, then its implied ReLU (in place) when it carries one."""

        def __init__(self, inner: nn.Module, relu: bool):
            super().__init__()
            self.inner, self.relu = inner, relu

        def forward(self, *xs):
            y = self.inner(*xs)
            return F.relu(y, inplace=True) if self.relu else y

    class Loss(nn.Module):
        """The last layer as a loss of its logits and the batch's random targets."""

        def __init__(self, kind: str):
            super().__init__()
            self.kind = kind

        def forward(self, x, target):
            if self.kind == "Sigmoid":
                return F.binary_cross_entropy_with_logits(x.float(), target)
            logits = x.reshape(-1, x.shape[-1]) if self.kind == "CrossEntropy" else x.reshape(x.shape[0], -1)
            return F.cross_entropy(logits.float(), target.reshape(-1))

    def _relu_owners(net: Net) -> set[str]:
        """The layers after which a ReLU runs: an implied activation moves past one BatchNorm."""
        children: dict[str, list[ShapedLayer]] = {s.name: [] for s in net.layers}
        for s in net.layers:
            for p in s.layer.parents:
                children[p].append(s)
        out = set()
        for name in implied_activations(net):
            kids = children[name]
            out.add(kids[0].name if len(kids) == 1 and kids[0].type == "BatchNorm" else name)
        return out

    def _module(s: ShapedLayer, last: bool, embedding) -> nn.Module:
        if last and s.type in LOSSES:
            return Loss(s.type)
        if s.type in ("Input", "Softmax", "CrossEntropy"):
            return nn.Identity() if s.type != "Softmax" else nn.Softmax(dim=-1)
        if s.type == "LMHead":
            return transformer.LMHead(s, embedding)
        make = cnn.BUILDERS.get(s.type) or transformer.BUILDERS.get(s.type)
        if make is None:
            raise UnsupportedError(f"layer type '{s.type}' cannot be profiled yet (layer '{s.name}')")
        return make(s)

    class SpecModel(nn.Module):
        """The net as one module: ``forward(x, target)`` returns the scalar loss."""

        def __init__(self, net: Net):
            super().__init__()
            self.net = net
            self.names = [s.name for s in net.layers]
            index = {name: i for i, name in enumerate(self.names)}
            self.parents = [tuple(index[p] for p in s.layer.parents) for s in net.layers]
            uses = [0] * len(self.names)
            for ps in self.parents:
                for p in ps:
                    uses[p] += 1
            self.uses = uses
            relu = _relu_owners(net)
            last = len(net.layers) - 1
            embedding = None
            nodes = []
            for i, s in enumerate(net.layers):
                m = _module(s, i == last, embedding)
                if embedding is None and isinstance(m, transformer.Embedding):
                    embedding = m
                nodes.append(Node(m, s.name in relu))
            self.nodes = nn.ModuleList(nodes)
            self.loss_kind = net.layers[last].type if net.layers[last].type in LOSSES else None

        def forward(self, x, target):
            outs: list = [None] * len(self.nodes)
            left = list(self.uses)
            last = len(self.nodes) - 1
            for i, node in enumerate(self.nodes):
                if i == 0:
                    outs[i] = node(x)
                    continue
                args = [outs[p] for p in self.parents[i]]
                for p in self.parents[i]:  # free an output once its last reader has it
                    left[p] -= 1
                    if left[p] == 0:
                        outs[p] = None
                outs[i] = node(*args, target) if i == last and self.loss_kind else node(*args)
            y = outs[last]
            return y if self.loss_kind else y.float().mean()

    def batch(net: Net, n: int, device, channels_last: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Random inputs and targets of ``n`` samples on ``device``."""
        data, last = net.layers[0], net.layers[-1]
        if "model" in net.meta:  # token ids
            vocab = int(next(s for s in net.layers if s.type == "Embedding").layer.spec["vocab"])
            x = torch.randint(0, vocab, (n, *data.out_shape), device=device)
        else:
            shape = data.out_shape
            torch_shape = (shape[2], shape[0], shape[1]) if len(shape) == 3 else tuple(shape)
            x = torch.randn(n, *torch_shape, device=device)
            if channels_last and x.dim() == 4:
                x = x.contiguous(memory_format=torch.channels_last)
        if last.type == "Softmax":
            target = torch.randint(0, int(prod(last.out_shape)), (n,), device=device)
        elif last.type == "CrossEntropy":
            vocab = int(last.in_shapes[0][1])
            target = torch.randint(0, vocab, (n, last.in_shapes[0][0]), device=device)
        elif last.type == "Sigmoid":
            shape = last.out_shape
            torch_shape = (shape[2], shape[0], shape[1]) if len(shape) == 3 else tuple(shape)
            target = torch.rand(n, *torch_shape, device=device)
        else:
            target = None
        return x, target

    def param_count(model: nn.Module) -> int:
        """Trainable parameters (a tied matrix counts once)."""
        return sum(p.numel() for p in model.parameters() if p.requires_grad)

    return locals()


_defined, __getattr__ = lazy.names(_defined)
