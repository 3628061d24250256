"""Data loaders per GPU and host: how many samples per second feed each GPU of a plan, and what
decoding costs the GPU itself.

- ``cpu``: JPEG decoding on the host's cores: configs/efficiencies.toml [loader.cpu_jpeg]
  (samples/s per core) x the plan's host cores per GPU (planner.hosts: the instance's, or the
  assumed host's, or ``--cpu-cores-per-gpu``).
- ``dali``: decoding on the GPU. A GPU with a hardware JPEG decoder (devices.toml
  ``jpeg_decoders`` > 0, cited: A100, A30, L4, H100, H200, GH200, B200, GB200, B300) runs at
  [loader.gpu_dali] (an A100 figure, not credited with the later GPUs' extra decoder engines)
  and the decoding is off the SMs. An NVIDIA GPU without one (or one the catalog cites none for:
  the conservative reading) decodes on its SMs: [loader.gpu_dali_sm] scaled by its FP32 peak
  over the A100's, and that time is charged to every step. DALI is CUDA-only: other vendors' GPUs read
  their data through the ``cpu`` loader, and the answer says so.
- ``none``: data already decoded (synthetic or in memory): no bound.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from planner import catalog

A100_FP32_FLOPS = 19.5e12  # NVIDIA A100 datasheet: 19.5 TFLOPS FP32 (devices.toml A100_40GB)
# How far a loader's rate may be off: the log spread (sample standard deviation of ln) of the
# published per-core JPEG training-pipeline rates configs/efficiencies.toml [loader.cpu_jpeg]
# lists: 80 (OpenCV decode + resize), 182 (tf.data, the one used), 250 (PyTorch DataLoader with
# Pillow-SIMD, a lower bound) and 326 (FFCV: 31,278 img/s on 96 vCPUs) images/s per core.
RATE_SD_LOG = float(np.std(np.log([80.0, 182.0, 250.0, 326.0]), ddof=1))


def _device_info(key: str) -> tuple[bool, int | None, float]:
    """(NVIDIA?, hardware JPEG decoders or None when the catalog does not say, FP32 FLOP/s)."""
    info = catalog.device(key)
    decoders = info.raw.get("jpeg_decoders")
    fp32 = float(info.device.peak_flops.get("fp32", np.nan))
    return info.vendor.lower() == "nvidia", None if decoders is None else int(decoders), fp32


def device_mode(loader: str, key: str) -> str:
    """What a device's loader is: cpu | dali-hw (hardware decoder) | dali-sm (on the SMs) | none."""
    if loader in ("none", "auto"):
        return "none"
    if loader == "cpu":
        return "cpu"
    nvidia, decoders, _ = _device_info(key)
    if not nvidia:
        return "cpu"
    return "dali-hw" if decoders else "dali-sm"


def _cpu_per_core() -> float:
    return catalog.loader_rates()["cpu_jpeg"]["samples_per_s_per_core"]


def _sm_rate(key: str) -> float:
    """Images/s one GPU decodes on its SMs (the A100 figure scaled by FP32 peak)."""
    _, _, fp32 = _device_info(key)
    return catalog.loader_rates()["gpu_dali_sm"]["samples_per_s_per_gpu"] * fp32 / A100_FP32_FLOPS


def _cores(hosts, device, gpus_per_node) -> np.ndarray:
    if hosts is None:
        return np.full(np.shape(device), catalog.host_cores_per_gpu())
    cores = hosts.cores()[device, hosts.column(gpus_per_node)]
    return np.where(np.isfinite(cores), cores, catalog.host_cores_per_gpu())


@lru_cache(maxsize=64)
def _by_device(loader: str, devices: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per device row, once per search: (reads through the CPU loader, GPU decoding rate in
    samples/s or inf, GPU seconds per sample decoding on the SMs) under ``loader``."""
    hw = catalog.loader_rates()["gpu_dali"]["samples_per_s_per_gpu"]
    modes = [device_mode(loader, k) for k in devices]
    on_cpu = np.array([m == "cpu" for m in modes], dtype=bool)
    rate = np.array([hw if m == "dali-hw" else np.inf for m in modes])
    decode = np.array(
        [1.0 / _sm_rate(k) if m == "dali-sm" else 0.0 for k, m in zip(devices, modes, strict=True)]
    )
    return on_cpu, rate, decode


def per_plan(loader: str, hosts, device, gpus_per_node) -> tuple[np.ndarray, np.ndarray]:
    """(samples/s per GPU, GPU seconds per sample spent decoding) of plans on device rows
    ``device`` (of ``hosts.devices``) in nodes of ``gpus_per_node``; without hosts, the assumed
    host and (dali) the hardware decoder's rate."""
    device = np.asarray(device)
    if loader not in ("cpu", "dali"):
        return np.full(device.shape, np.inf), np.zeros(device.shape)
    cpu = _cpu_per_core() * _cores(hosts, device, gpus_per_node)
    if loader == "cpu":
        return cpu, np.zeros(device.shape)
    if hosts is None or not hosts.devices:
        hw = catalog.loader_rates()["gpu_dali"]["samples_per_s_per_gpu"]
        return np.full(device.shape, hw), np.zeros(device.shape)
    on_cpu, rate, decode = _by_device(loader, tuple(hosts.devices))
    return np.where(on_cpu[device], cpu, rate[device]), decode[device]


def per_device(loader: str, key: str, cores_per_gpu: float | None = None) -> tuple[float, float]:
    """(samples/s one GPU's loader sustains, GPU seconds per sample decoding on its SMs) of
    device ``key`` under ``loader`` (cpu | dali | none) with ``cores_per_gpu`` host cores feeding
    each GPU (None: the assumed host's); a measured run's loader as its source states it."""
    mode = device_mode(loader, key)
    if mode == "cpu":
        cores = catalog.host_cores_per_gpu() if cores_per_gpu is None else cores_per_gpu
        return _cpu_per_core() * cores, 0.0
    if mode == "dali-hw":
        return catalog.loader_rates()["gpu_dali"]["samples_per_s_per_gpu"], 0.0
    if mode == "dali-sm":
        return np.inf, 1.0 / _sm_rate(key)
    return np.inf, 0.0


def _vendor_decoders(key: str | None) -> str:
    """An AMD GPU's own JPEG cores, where the catalog cites them: there, not used (DALI is CUDA-only)."""
    decoders = _device_info(key)[1] if key else None
    return f"; its {decoders} hardware JPEG cores serve AMD's rocJPEG, not modelled" if decoders else ""


def describe(loader: str, hosts, g: int, gpus_per_node: int) -> dict:
    """Record fields: the loader a plan on device row ``g`` uses, its rate per GPU and why."""
    if loader not in ("cpu", "dali"):
        return {"loader": "none (data already decoded)"}
    key = hosts.devices[g] if hosts is not None and hosts.devices else None
    mode = "cpu" if loader == "cpu" else (device_mode(loader, key) if key else "dali-hw")
    rate, decode = per_plan(loader, hosts, np.array([g]), np.array([gpus_per_node]))
    if mode == "cpu":
        cores = float(_cores(hosts, np.array([g]), np.array([gpus_per_node]))[0])
        why = f"JPEG decoding on {cores:g} host cores per GPU x {_cpu_per_core():g} images/s per core"
        if loader == "dali":
            why += " (DALI is CUDA-only: this GPU's data is decoded on the CPU" + _vendor_decoders(key) + ")"
        return {"loader": why, "loader_samples_s_per_gpu": float(rate[0])}
    if mode == "dali-hw":
        return {
            "loader": "DALI on the GPU's hardware JPEG decoder (the A100's measured rate)",
            "loader_samples_s_per_gpu": float(rate[0]),
        }
    why = (
        "no hardware JPEG decoder"
        if _device_info(key)[1] == 0
        else "no hardware JPEG decoder cited in the catalog"
    )
    return {
        "loader": f"DALI decoding on the SMs ({why}): {decode[0] * 1e6:.0f} us of GPU time per image, charged "
        "to the step (the A100's all-CUDA rate scaled by this GPU's FP32 peak: an assumption)",
        "loader_samples_s_per_gpu": float(1.0 / decode[0]),
    }
