"""result stage of the pipeline."""
