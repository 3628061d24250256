"""Measure real training steps on the local GPU with a plain PyTorch loop (no planner code).

This is the reference the cost model is checked against on hardware at hand: torchvision's CNNs
and Hugging Face transformer configs (random weights, built offline from the config), trained
on synthetic data that already sits on the GPU, so neither the input pipeline nor the host-to-
device copy is measured. Method:

- ``torch.backends.cudnn.benchmark = True``; fp32 runs with TF32 off, tf32 runs with TF32 on
  for matmuls and convolutions, bf16 / fp16 runs under ``torch.autocast`` with fp32 master
  weights (fp16 with a GradScaler), CNNs in channels-last memory format under mixed precision.
- SGD with momentum 0.9 for CNNs, AdamW (foreach) for transformers.
- CUDA events around forward, backward and the optimizer step of every step; ``--warmup``
  steps are dropped (cuDNN autotuning, allocator warm-up); the median over ``--steps`` is
  reported. An out-of-memory batch is reported as such, not as a crash.
- Also the achievable peaks: dense matmul TFLOP/s per precision (8192^3, random data) and
  device-to-device copy bandwidth (bytes read + written).

Output: one CSV row per (net, precision, batch) with samples/s and step/forward/backward/
optimizer milliseconds, plus the peaks, on stdout or into ``--out``.

Run on a machine with a CUDA GPU and torchvision: python benchmarks/torch_reference_loop.py
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
import time

import torch

CNN_INPUT = {"inception_v3": 299}
HF_MODELS = {
    # name: (config class, kwargs) - the published shapes of these models
    "bert-large": (
        "BertConfig",
        dict(
            hidden_size=1024,
            num_hidden_layers=24,
            num_attention_heads=16,
            intermediate_size=4096,
            vocab_size=30522,
        ),
    ),
    "gpt2-xl": ("GPT2Config", dict(n_embd=1600, n_layer=48, n_head=25, vocab_size=50257, n_positions=1024)),
}


def _precision_context(precision: str):
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    torch.backends.cudnn.allow_tf32 = precision == "tf32"
    if precision in ("bf16", "fp16"):
        dtype = torch.bfloat16 if precision == "bf16" else torch.float16
        return lambda: torch.autocast("cuda", dtype=dtype)
    import contextlib

    return contextlib.nullcontext


def _build(net: str, precision: str):
    """(model, make_batch(n) -> (inputs, targets), loss_fn, optimizer)."""
    if net in HF_MODELS:
        import transformers

        cls_name, kw = HF_MODELS[net]
        cfg = getattr(transformers, cls_name)(**kw)
        model = (transformers.BertForMaskedLM if net.startswith("bert") else transformers.GPT2LMHeadModel)(
            cfg
        )
        model = model.cuda()
        vocab = cfg.vocab_size

        def batch(n, seq):
            ids = torch.randint(0, vocab, (n, seq), device="cuda")
            return ids, ids

        def loss_fn(model, x, y):
            return model(input_ids=x, labels=y).loss

        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
        return model, batch, loss_fn, opt
    import torchvision

    kwargs = {"aux_logits": False, "init_weights": False} if net == "inception_v3" else {}
    model = getattr(torchvision.models, net)(weights=None, **kwargs).cuda()
    mem = torch.channels_last if precision in ("bf16", "fp16") else torch.contiguous_format
    model = model.to(memory_format=mem)
    size = CNN_INPUT.get(net, 224)

    def batch(n, _seq):
        x = torch.randn(n, 3, size, size, device="cuda").to(memory_format=mem)
        return x, torch.randint(0, 1000, (n,), device="cuda")

    ce = torch.nn.CrossEntropyLoss()

    def loss_fn(model, x, y):
        return ce(model(x), y)

    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, foreach=True)
    return model, batch, loss_fn, opt


def measure(net: str, precision: str, n: int, seq: int, steps: int, warmup: int) -> dict:
    """Median forward / backward / optimizer / step milliseconds of ``steps`` timed steps."""
    model, make, loss_fn, opt = _build(net, precision)
    ctx = _precision_context(precision)
    scaler = torch.amp.GradScaler("cuda", enabled=precision == "fp16")
    x, y = make(n, seq)
    times = []
    for i in range(warmup + steps):
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
        ev[0].record()
        with ctx():
            loss = loss_fn(model, x, y)
        ev[1].record()
        scaler.scale(loss).backward()
        ev[2].record()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        ev[3].record()
        if i >= warmup:
            times.append(ev)
    torch.cuda.synchronize()
    fwd = statistics.median(e[0].elapsed_time(e[1]) for e in times)
    bwd = statistics.median(e[1].elapsed_time(e[2]) for e in times)
    upd = statistics.median(e[2].elapsed_time(e[3]) for e in times)
    step = statistics.median(e[0].elapsed_time(e[3]) for e in times)
    return dict(forward_ms=fwd, backward_ms=bwd, optimizer_ms=upd, step_ms=step, samples_per_s=n / step * 1e3)


def peaks() -> list[dict]:
    """Dense matmul TFLOP/s per precision and device-to-device copy bandwidth."""
    out = []
    m = 8192
    for precision, dtype, tf32 in (
        ("fp32", torch.float32, False),
        ("tf32", torch.float32, True),
        ("bf16", torch.bfloat16, False),
        ("fp16", torch.float16, False),
    ):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        a = torch.randn(m, m, device="cuda", dtype=dtype)
        b = torch.randn(m, m, device="cuda", dtype=dtype)
        for _ in range(3):
            a @ b
        torch.cuda.synchronize()
        reps = 10
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(reps):
            a @ b
        e.record()
        torch.cuda.synchronize()
        sec = s.elapsed_time(e) / 1e3 / reps
        out.append(dict(kind="matmul_tflops", precision=precision, value=2 * m**3 / sec / 1e12))
    x = torch.empty(2 * 1024**3, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    for _ in range(3):
        y.copy_(x)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(10):
        y.copy_(x)
    torch.cuda.synchronize()
    sec = (time.perf_counter() - t0) / 10
    out.append(dict(kind="copy_gbs_read_plus_write", precision="", value=2 * x.numel() / sec / 1e9))
    # host dispatch: a long chain of tiny kernels, launch-bound
    z = torch.zeros(16, device="cuda")
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(5000):
        z.add_(1.0)
    torch.cuda.synchronize()
    out.append(dict(kind="tiny_kernel_us", precision="", value=(time.perf_counter() - t0) / 5000 * 1e6))
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nets", default="resnet50,vgg16,alexnet,inception_v3,densenet121")
    ap.add_argument("--precisions", default="fp32,tf32,bf16")
    ap.add_argument("--batches", default="32,64,128,256")
    ap.add_argument("--seq", type=int, default=0, help="sequence length of transformer nets")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--peaks", action="store_true")
    ap.add_argument("--out", default="-")
    args = ap.parse_args(argv)
    torch.backends.cudnn.benchmark = True
    fh = sys.stdout if args.out == "-" else open(args.out, "w", newline="")
    cols = [
        "gpu",
        "torch",
        "net",
        "precision",
        "batch",
        "seq_len",
        "samples_per_s",
        "step_ms",
        "forward_ms",
        "backward_ms",
        "optimizer_ms",
        "status",
    ]
    w = csv.DictWriter(fh, fieldnames=cols)
    w.writeheader()
    gpu = torch.cuda.get_device_name()
    for net in args.nets.split(","):
        for precision in args.precisions.split(","):
            for n in map(int, args.batches.split(",")):
                row = dict(
                    gpu=gpu,
                    torch=torch.__version__,
                    net=net,
                    precision=precision,
                    batch=n,
                    seq_len=args.seq or "",
                )
                try:
                    row.update(measure(net, precision, n, args.seq, args.steps, args.warmup), status="ok")
                except torch.OutOfMemoryError:
                    row["status"] = "out of memory"
                torch.cuda.empty_cache()
                w.writerow({k: (f"{v:.4f}" if isinstance(v, float) else v) for k, v in row.items()})
                fh.flush()
    if args.peaks:
        for p in peaks():
            print(f"# peak,{gpu},{p['kind']},{p['precision']},{p['value']:.1f}", file=fh)
    if fh is not sys.stdout:
        fh.close()


if __name__ == "__main__":
    main()
