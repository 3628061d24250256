"""``planner profile``: a request in, measured rows (and per-layer tables) out (imports torch)."""

from __future__ import annotations

from dataclasses import dataclass, field

from costs.hardware import PRECISIONS
from costs.specs.transformer_spec import attention_fields
from planner.errors import BadInput
from planner.profile import compare, lazy, nets, peaks, rows, timing
from planner.profile.hooks import measure_layers
from planner.profile.predict import predict


def _defined() -> dict:
    """This module's names, defined on first use: PyTorch, the optional extra of `planner
    profile`, is imported here and not when planner starts."""
    import torch

    from planner.profile.device import env as device_env
    from planner.profile.device import resolve

    @dataclass(frozen=True)
    class Request:
        net: str
        batches: tuple[int, ...] = ()  # empty: the spec's batch
        seq_len: int | None = None
        attention: str | None = None  # standard | flash; None: the net spec's
        precision: str = "fp32"
        optimizer: str = "momentum"
        steps: int = 10
        warmup: int = 3
        device: str = "auto"
        device_key: str | None = None
        max_memory_gb: float | None = None
        peaks: bool = True
        layers: bool = False
        calibration: str | None = None
        overrides: nets.Overrides = field(default_factory=nets.Overrides)

    @dataclass
    class Result:
        env: rows.Env
        device: str  # "cuda" or "cpu"
        net: str
        steps: list = field(default_factory=list)  # timing.Step per batch
        predicted: dict = field(default_factory=dict)  # batch -> predict.Prediction
        rows: list = field(default_factory=list)  # CSV rows
        peaks: list = field(default_factory=list)  # peak rows
        layers: dict = field(default_factory=dict)  # batch -> compare.table() (or "out of memory")
        predict_key: str | None = None
        attention: dict = field(default_factory=dict)  # a transformer's kernel and its source

    def validate(req: Request) -> None:
        if any(n < 1 for n in req.batches):
            raise BadInput(f"--batch sizes must be positive integers, got {','.join(map(str, req.batches))}")
        if req.precision not in PRECISIONS:
            raise BadInput(f"--precision '{req.precision}' (valid: {', '.join(PRECISIONS)})")
        if req.optimizer not in timing.OPTIMIZERS:
            raise BadInput(f"--optimizer '{req.optimizer}' (valid: {', '.join(timing.OPTIMIZERS)})")
        if req.steps < 1 or req.warmup < 0:
            raise BadInput(f"--steps must be >= 1 and --warmup >= 0, got {req.steps} and {req.warmup}")
        if req.max_memory_gb is not None and req.max_memory_gb <= 0:
            raise BadInput(f"--max-memory-gb must be positive, got {req.max_memory_gb}")

    def _limit_gpu_memory(device: torch.device, gb: float | None) -> None:
        if gb is None or device.type != "cuda":
            return
        total = torch.cuda.get_device_properties(device).total_memory
        torch.cuda.set_per_process_memory_fraction(min(gb * 1e9 / total, 1.0), device)

    def _settings(req: Request) -> str:
        return f"optimizer {req.optimizer}, median of {req.steps} steps after {req.warmup} warm-up"

    def profile(req: Request) -> Result:
        """Measure every batch of the request (and, with ``layers``, each layer's times)."""
        validate(req)
        o = req.overrides
        net = nets.load(req.net, nets.Overrides(req.seq_len, o.n_layers, o.vocab, o.model, req.attention))
        device = resolve(req.device)
        env = device_env(device, req.device_key)
        name = nets.display_name(req.net)
        key = env.key if env.key != rows.CPU else req.device_key
        out = Result(env, device.type, name, predict_key=key, attention=attention_fields(net.meta))
        _limit_gpu_memory(device, req.max_memory_gb)
        opts = timing.Options(req.precision, req.optimizer, req.steps, req.warmup, req.max_memory_gb)
        seq = net.layers[0].out_shape[0] if nets.is_transformer(net) else None
        for n in req.batches or (net.default_batch,):
            if key is not None:
                out.predicted[n] = predict(net, key, req.precision, n, req.optimizer, req.calibration)
            if req.layers:
                out.layers[n] = _layers(net, n, device, opts, out.predicted.get(n))
                continue
            step = timing.measure(net, n, device, opts)
            out.steps.append(step)
            kernel = out.attention.get("attention")  # the kernel measured and predicted
            out.rows.append(rows.row(env, name, req.precision, step, _settings(req), seq, kernel))
        if req.peaks and not req.layers:
            out.peaks = rows.peak_rows(env, peaks.measure(device))
        return out

    def _layers(net, n: int, device: torch.device, opts: timing.Options, predicted):
        trainer = None
        try:
            trainer = timing.Trainer(net, n, device, opts)
            measured = measure_layers(trainer, opts.steps, opts.warmup)
            out = compare.table(net, measured, predicted)
        except (RuntimeError, MemoryError) as exc:
            if not timing.is_oom(exc):
                raise
            return timing.OOM
        finally:
            del trainer
            timing.free(device)
        plain = timing.measure(net, n, device, opts)  # the same step without the marks, for scale
        return out | {"plain_step_ms": plain.step * 1e3 if plain.status == "ok" else None}

    return locals()


_defined, __getattr__ = lazy.names(_defined)
