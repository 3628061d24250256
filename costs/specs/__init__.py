"""What a network is: spec files and Hugging Face ``config.json`` in, shaped layers out.

Owns the layer types and their math (CNN layers in ``layers`` and ``conv``, transformer blocks in
``transformer`` and ``transformer_shapes``, today's vision layers in ``vision``), the DAG of a
spec (``graph``, ``nodes``), the description formats of transformers (``transformer_spec``,
``hf_config``, its decoder families ``hf_decoders`` and typed field reads ``hf_fields``) and vision
nets (``vision_nets``) and the per-layer cost
coefficients, FLOPs and bytes as affine functions of the batch (``coefficients``).

May import: ``costs.errors`` and its own modules. A rule set (:mod:`costs.rules`) is passed in
as a value, never imported.
"""
