"""`planner estimate`: the short path of the pipeline (request, evaluator, records), no search."""
