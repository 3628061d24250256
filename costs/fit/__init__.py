"""Fitting and error: least-squares calibration of efficiency parameters on measured runs
(``calibration``), prediction intervals from held-out residuals (``uncertainty``) and the +-20%
sensitivity of a prediction to each parameter (``sensitivity``).

May import: ``costs.errors``, ``costs.hardware`` and ``costs.modern`` (the parameters it moves).
"""
