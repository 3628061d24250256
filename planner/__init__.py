"""planner: find the fastest or cheapest way to train a network, without running it."""

__version__ = "0.1.0"
