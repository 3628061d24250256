"""search stage of the pipeline."""
