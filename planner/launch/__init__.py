"""`planner launch`: a saved plan written as the files that run it on a training stack.

:mod:`planner.launch.plan` reads the plan; :mod:`planner.launch.target` is the interface of a
target (can it run the plan and why not; plan -> files); one module per target;
:mod:`planner.launch.registry` names them all; :mod:`planner.launch.limits` keeps a search to
what targets run (`planner optimize --target`). The reference scripts the torchrun, deepspeed
and accelerate targets launch live in examples/ (shipped as ``planner.examples``).
"""
