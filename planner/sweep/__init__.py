"""sweep stage of the pipeline."""
