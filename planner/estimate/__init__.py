"""estimate stage of the pipeline."""
