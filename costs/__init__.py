"""costs: the training cost evaluator, vectorised over arrays of plans.

Pure numpy and scipy; knows nothing of catalogs on disk, search or the command line. It started
as the PALEO analytical model (Qi, Sparks, Talwalkar, ICLR 2017), kept exact as rule sets, and
adds the calibrated ``modern`` rules and the LLM evaluator.

Layout, bottom up (a module imports only from the rows above it or its own row):

* ``errors``, ``hardware``, ``plans``, ``energy``: error family, devices and links as value
  objects (SI units), the plan columns, the energy model;
* ``specs/``: network specs, layer shapes, per-layer FLOPs and bytes;
* ``rules``: the rule sets (PALEO 2016 and 2018, planner, modern) as named flags;
* ``comm/``: AllReduce schemes, collectives, overlap;
* ``modern/``: efficiencies, tiling, the per-layer roofline, data-parallel scoring;
* ``llm/``: transformers under model parallelism, their shards and memory;
* ``goodput``: failures, checkpoints and restarts: goodput and the expected wall time of a run;
* ``model``: ``evaluate``, the one entry point, dispatching to a rule set's evaluator;
  ``modelparallel``: PALEO's explicit model-parallel blocks;
* ``fit/``: calibration, intervals, sensitivity.
"""
