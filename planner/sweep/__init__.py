"""`planner sweep`: grids of optimize requests (spec.py), run as studies locally or on Slurm (run.py)."""
