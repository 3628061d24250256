"""metrics stage of the pipeline."""
