"""The modern rule set's evaluator for layer graphs: achievable rates per GPU generation and
precision (``efficiency``), tile and wave quantization (``tiling``), the per-layer roofline
(``roofline``) and the vectorised scoring of data-parallel plans (``evaluator``: compute, host
overheads, data-loader bound, overlapped collectives).

May import: ``costs.errors``, ``costs.hardware``, ``costs.plans``, ``costs.specs`` and
``costs.comm``.
"""
