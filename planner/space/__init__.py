"""space stage of the pipeline."""
