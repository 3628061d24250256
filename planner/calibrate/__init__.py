"""Calibration: measured runs in, fitted efficiency profiles and their measured error out."""
