"""`planner profile`: measure training steps of a net on the local accelerator with PyTorch.

PyTorch is an optional extra (``pip install '.[profile]'``). The modules that import it are
``cnn``, ``transformer``, ``builder``, ``timing``, ``hooks``, ``peaks``, ``device`` and ``run``
(tests/test_architecture.py keeps the list); the CLI imports them only after checking that
torch is installed. Everything else here (net loading, rows, the per-layer comparison) runs
without it, and nothing outside this package imports torch.
"""
