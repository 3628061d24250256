"""PyTorch modules for the transformer layer types of :mod:`costs.specs.transformer` (imports torch).

Tensors are ``(N, seq, width)``; tokens ``(N, seq)``. Attention takes the fused Q, K, V
projection as the spec does; ``flash`` runs PyTorch's fused ``scaled_dot_product_attention``,
``standard`` materialises the scores (matmul, mask, softmax, matmul). Grouped-query attention
repeats each key/value head for its group of query heads. MoE routes each token to its top-k
experts (softmax gate, renormalised over the chosen k) and loops over the experts.
"""

from __future__ import annotations

import math

from costs.specs.nodes import ShapedLayer
from planner.profile import lazy


def _defined() -> dict:
    """This module's names, defined on first use: PyTorch, the optional extra of `planner
    profile`, is imported here and not when planner starts."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    class Embedding(nn.Module):
        """Token table plus learned positions and token types where the spec has them."""

        def __init__(self, s: ShapedLayer):
            super().__init__()
            spec, d = s.layer.spec, s.out_shape[1]
            self.tok = nn.Embedding(int(spec["vocab"]), d)
            self.pos = nn.Embedding(int(spec["positions"]), d) if int(spec.get("positions", 0)) else None
            self.typ = nn.Embedding(int(spec["types"]), d) if int(spec.get("types", 0)) else None
            for table in (
                self.tok,
                self.pos,
                self.typ,
            ):  # GPT-2's and BERT's 0.02: logits stay finite in fp16
                if table is not None:
                    nn.init.normal_(table.weight, 0.0, 0.02)

        def forward(self, tokens):
            y = self.tok(tokens)
            if self.pos is not None:
                y = y + self.pos(torch.arange(tokens.shape[1], device=tokens.device))
            if self.typ is not None:
                y = y + self.typ(torch.zeros_like(tokens))
            return y

    class RMSNorm(nn.Module):
        def __init__(self, d: int, eps: float = 1e-6):
            super().__init__()
            self.weight, self.eps = nn.Parameter(torch.ones(d)), eps

        def forward(self, x):
            x32 = x.float()
            y = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
            return (y * self.weight).to(x.dtype)

    class Attention(nn.Module):
        def __init__(self, s: ShapedLayer):
            super().__init__()
            spec = s.layer.spec
            self.h, self.hd = int(spec["n_heads"]), int(spec["head_dim"])
            self.kv = int(spec.get("n_kv_heads", self.h))
            self.causal, self.flash = bool(spec.get("causal", False)), bool(spec.get("flash", False))

        def _heads(self, x, heads: int):
            n, seq, _ = x.shape
            return x.view(n, seq, heads, self.hd).transpose(1, 2)

        def forward(self, qkv):
            n, seq, _ = qkv.shape
            q, k, v = qkv.split([self.h * self.hd, self.kv * self.hd, self.kv * self.hd], dim=-1)
            q, k, v = self._heads(q, self.h), self._heads(k, self.kv), self._heads(v, self.kv)
            if self.kv != self.h:
                k = k.repeat_interleave(self.h // self.kv, dim=1)
                v = v.repeat_interleave(self.h // self.kv, dim=1)
            if self.flash:
                y = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
            else:
                scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.hd))
                if self.causal:
                    mask = torch.ones(seq, seq, dtype=torch.bool, device=qkv.device).triu(1)
                    scores = scores.masked_fill(mask, float("-inf"))
                y = scores.softmax(dim=-1) @ v
            return y.transpose(1, 2).reshape(n, seq, self.h * self.hd)

    class SwiGLU(nn.Module):
        def forward(self, x):
            gate, up = x.chunk(2, dim=-1)
            return F.silu(gate) * up

    class Add(nn.Module):
        def forward(self, *xs):
            out = xs[0]
            for x in xs[1:]:
                out = out + x
            return out

    class Expert(nn.Module):
        """One expert's feed-forward; the biases (when any) are the up (or gate) and down ones,
        as :func:`costs.specs.transformer_shapes._expert_params` counts them."""

        def __init__(self, d: int, f: int, swiglu: bool, bias: bool):
            super().__init__()
            self.gate = nn.Linear(d, f, bias=bias) if swiglu else None
            self.up = nn.Linear(d, f, bias=bias and not swiglu)
            self.down = nn.Linear(f, d, bias=bias)

        def forward(self, x):
            h = (
                F.silu(self.gate(x)) * self.up(x)
                if self.gate is not None
                else F.gelu(self.up(x), approximate="tanh")
            )
            return self.down(h)

    class MoE(nn.Module):
        def __init__(self, s: ShapedLayer):
            super().__init__()
            spec, d = s.layer.spec, s.in_shapes[0][1]
            self.k = int(spec["top_k"])
            swiglu = spec.get("activation", "swiglu") == "swiglu"
            self.router = nn.Linear(d, int(spec["n_experts"]), bias=False)
            f, bias = int(spec["d_ff"]), bool(spec.get("bias", False))
            self.experts = nn.ModuleList(Expert(d, f, swiglu, bias) for _ in range(int(spec["n_experts"])))

        def forward(self, x):
            n, seq, d = x.shape
            flat = x.reshape(-1, d)
            gates = self.router(flat).float().softmax(dim=-1)
            top, idx = gates.topk(self.k, dim=-1)
            top = (top / top.sum(dim=-1, keepdim=True)).to(x.dtype)
            out = torch.zeros_like(flat)
            for j, expert in enumerate(self.experts):
                rows, slot = (idx == j).nonzero(as_tuple=True)
                if rows.numel():
                    y = expert(flat[rows]) * top[rows, slot, None]
                    out = out.index_add(0, rows, y.to(out.dtype))
            return out.view(n, seq, d)

    class LMHead(nn.Module):
        """The vocabulary projection; a tied head reads the token embedding's matrix."""

        def __init__(self, s: ShapedLayer, embedding: Embedding | None):
            super().__init__()
            spec, d, v = s.layer.spec, s.in_shapes[0][1], s.out_shape[1]
            tied = bool(spec.get("tied", False)) and embedding is not None
            self.weight = None if tied else nn.Parameter(torch.empty(v, d).normal_(0.0, 0.02))
            self.bias = nn.Parameter(torch.zeros(v)) if spec.get("bias", False) else None
            self._tied = [embedding] if tied else []  # a list: not registered twice as a submodule

        def forward(self, x):
            w = self._tied[0].tok.weight if self._tied else self.weight
            return F.linear(x, w, self.bias)

    class BatchedMatMul(nn.Module):
        def forward(self, a, b):
            return a @ b

    class SeqSoftmax(nn.Module):
        def forward(self, x):
            return x.softmax(dim=-1)

    def linear(s: ShapedLayer) -> nn.Module:
        return nn.Linear(s.in_shapes[0][1], s.out_shape[1], bias=bool(s.layer.spec.get("bias", False)))

    BUILDERS = {
        "Embedding": Embedding,
        "Linear": linear,
        "LayerNorm": lambda s: nn.LayerNorm(s.out_shape[-1]),
        "RMSNorm": lambda s: RMSNorm(s.out_shape[-1]),
        "Attention": Attention,
        "GELU": lambda s: nn.GELU(approximate="tanh"),
        "SwiGLU": lambda s: SwiGLU(),
        "Add": lambda s: Add(),
        "MoE": MoE,
        "BatchedMatMul": lambda s: BatchedMatMul(),
        "SeqSoftmax": lambda s: SeqSoftmax(),
    }
    return locals()


_defined, __getattr__ = lazy.names(_defined)
