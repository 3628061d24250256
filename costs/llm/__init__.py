"""The LLM evaluator: transformers under tensor, sequence, pipeline and expert parallelism,
ZeRO and recomputation (``evaluator``), one GPU's tensor-parallel shard costed by the layer
roofline (``shard``) into the part tables the plans read (``tables``), memory per GPU
(``memory``: weights, optimizer states, activations after Korthikanti et al. 2022) and the
expert all-to-alls of a mixture of experts (``experts``).

May import: ``costs.errors``, ``costs.hardware``, ``costs.plans``, ``costs.specs``,
``costs.comm`` and ``costs.modern``.
"""
