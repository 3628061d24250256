"""Software stacks: named calibration profiles with the plans they can run (configs/stacks/)."""
