"""request stage of the pipeline."""
