"""Reference causal-LM training script: a Hugging Face transformers model built from a config
(no weights are downloaded), trained on synthetic tokens, one process per GPU.

    torchrun --nproc-per-node 8 examples/train_lm.py --model-config model_config.json \\
        --seq-len 8192 --batch 1 --accumulation 8 --zero 3 --precision bf16 --log-csv steps.csv

``--model-config`` is a JSON file of a transformers config (``model_type`` plus its fields, as
`planner launch --target torchrun` writes it for the plan's net); ``--attention`` is the plan's
kernel (flash: PyTorch's fused scaled_dot_product_attention; standard: transformers' eager
attention), recorded in the logged row's ``attention`` column; ``--tiny`` builds a two-layer
Llama of width 64 that runs one step on a CPU. Data parallelism is PyTorch's (DDP, ZeRO-1's
sharded optimizer state, FSDP2), or the engine of ``--deepspeed-config`` (DeepSpeed) or of
``--accelerate`` (Hugging Face accelerate, configured by `accelerate launch --config_file`).
"""

from __future__ import annotations

import argparse
import json

import torch
from trainlib import common_arguments, finish, log_row, mode, setup, train, wrap

TINY = {
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 256,
    "max_position_embeddings": 128,
}


# planner's attention kernel -> transformers' attn_implementation: "sdpa" is PyTorch's
# scaled_dot_product_attention, whose fused kernels (FlashAttention, memory-efficient) keep no
# s x s scores; "eager" multiplies Q K^T, softmax and V as separate operations and keeps the scores
ATTENTION = {"flash": "sdpa", "standard": "eager"}


def build(args) -> torch.nn.Module:
    from transformers import AutoConfig, AutoModelForCausalLM

    spec = TINY if args.tiny else json.loads(open(args.model_config).read())
    spec = dict(spec)
    config = AutoConfig.for_model(spec.pop("model_type"), **spec)
    if args.recompute == "full":
        config.use_cache = False
    model = AutoModelForCausalLM.from_config(config, attn_implementation=ATTENTION[args.attention])
    if args.recompute == "full":  # every decoder layer's forward recomputed in the backward pass
        model.gradient_checkpointing_enable()
    return model


def _lm_loss(model, tokens, _):
    return model(input_ids=tokens, labels=tokens).loss


def _deepspeed(model, args, device, batches):
    """Train with DeepSpeed's engine: it owns ZeRO, accumulation and the precision (its config)."""
    import time

    import deepspeed

    engine, _, _, _ = deepspeed.initialize(
        model=model, model_parameters=model.parameters(), config=args.deepspeed_config
    )
    times = []
    for _ in range(args.steps):
        start = time.perf_counter()
        for _ in range(engine.gradient_accumulation_steps()):
            tokens, _ = batches()
            engine.backward(_lm_loss(engine, tokens, None))
            engine.step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - start)
    return times


def _accelerate(model, args, batches):
    """Train with accelerate's Accelerator: `accelerate launch` chose FSDP, DeepSpeed or the
    Megatron-LM plugin (which owns the microbatches of a step: one call runs them all). With a
    parallelism_config (FSDP2 with tensor and/or context parallelism), transformers shards the
    model's linears over the accelerator's ``tp`` mesh before FSDP2 shards the rest, as
    accelerate's examples/torch_native_parallelism/nd_parallel.py does."""
    import time

    from accelerate import Accelerator
    from accelerate.utils import DistributedType

    acc = Accelerator(gradient_accumulation_steps=args.accumulation)
    if acc.distributed_type == DistributedType.MEGATRON_LM:
        optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
        return _accelerate_megatron(acc, model, optimizer, args, batches), {}
    nd = acc.parallelism_config
    if nd is not None and nd.tp_enabled:
        _check_tp_prepare()
        model = _tensor_parallel(model.to(acc.device), nd.tp_size, acc.torch_device_mesh)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    model, optimizer = acc.prepare(model, optimizer)
    times = []
    for _ in range(args.steps):
        start = time.perf_counter()
        for _ in range(args.accumulation):
            tokens, _ = batches()
            with acc.accumulate(model):
                acc.backward(_context_parallel_loss(acc, model, tokens.to(acc.device)))
                optimizer.step()
                optimizer.zero_grad()
        acc.wait_for_everyone()
        times.append(time.perf_counter() - start)
    return times, _degrees(nd)


def _degrees(nd) -> dict:
    """The measurement row's model-parallel columns of an accelerate parallelism_config (empty
    where there is none): tensor and context degrees, and the context exchange in planner's
    names (accelerate's cp_comm_strategy is torch's rotate method: alltoall passes shards
    around a ring, p2p; allgather gathers them)."""
    if nd is None:
        return {}
    row = {"tp": nd.tp_size}
    if nd.cp_enabled:
        strategy = nd.cp_handler.cp_comm_strategy
        row.update(
            cp=nd.cp_size, cp_comm={"alltoall": "p2p", "allgather": "all_gather"}.get(strategy, strategy)
        )
    return row


def _tensor_parallel(model, tp: int, mesh):
    """The model with its linears sharded over the mesh's ``tp`` dimension by the model's own
    tensor-parallel plan (``DistributedConfig(tp_plan="auto")``, the plan a pretrained model
    gets from ``from_pretrained(tp_plan="auto")``)."""
    import transformers

    if int(transformers.__version__.split(".")[0]) < 5:  # 4.x shards only in from_pretrained
        raise SystemExit(
            f"tensor parallelism from a config needs transformers>=5 (have {transformers.__version__})"
        )
    from transformers.distributed import DistributedConfig

    if hasattr(type(model), "maybe_distribute_model"):  # later 5.x (5.17: distributed/mixin.py)
        return type(model).maybe_distribute_model(model, DistributedConfig(tp_size=tp, tp_plan="auto"), mesh)
    return _tensor_parallel_5_0(model, mesh["tp"])


def _tensor_parallel_5_0(model, tp_mesh):
    """transformers 5.0's sharding of a model built from a config: the input and output hooks of
    its plan (``distribute_model``), then each planned parameter made a DTensor sharded as the
    hooks expect. transformers 5.0 cuts weights only while reading a checkpoint (its styles'
    ``shard_tensor`` takes a safetensors slice), so the cut is torch's ``distribute_tensor``
    with the styles' placements (integrations/tensor_parallel.py): colwise splits the output
    features (a linear weight's dim 0, its bias too), rowwise the input features (dim 1) and
    keeps a bias whole. Parameters outside the plan (norms, embeddings) stay plain tensors,
    which accelerate's ``_prepare_tp`` replicates over the tp mesh."""
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor
    from transformers.integrations import tensor_parallel as hf_tp

    model = hf_tp.distribute_model(model, "auto", None, tp_mesh, tp_mesh.size())
    for name, param in list(model.named_parameters()):
        style = hf_tp._get_parameter_tp_plan(parameter_name=name, tp_plan=model.tp_plan)
        if style is None:
            continue
        layer = hf_tp.ALL_PARALLEL_STYLES[style]
        if isinstance(layer, hf_tp.ColwiseParallel) and layer.use_dtensor:
            placement = Shard(0)
        elif isinstance(layer, hf_tp.RowwiseParallel) and layer.use_dtensor:
            placement = Shard(1) if param.dim() == 2 else Replicate()
        else:
            raise SystemExit(f"{name}: its tensor-parallel style {style} is not colwise or rowwise")
        owner, attr = name.rsplit(".", 1)
        shard = distribute_tensor(param.detach(), tp_mesh, [placement])
        setattr(
            model.get_submodule(owner), attr, torch.nn.Parameter(shard, requires_grad=param.requires_grad)
        )
    return model


def _check_tp_prepare() -> None:
    """Stop in one line where accelerate cannot prepare a tensor-parallel model under FSDP2:
    Accelerator._prepare_tp (accelerate 1.15) imports transformers' ReplicateParallel to wrap
    the parameters the plan leaves unsharded, a class transformers has from 4.52.2 to 5.0.0 only
    (5.1 removed it); a model built from a config is sharded by transformers 5 alone, so the
    pair that runs is transformers 5.0.0."""
    try:
        from transformers.integrations.tensor_parallel import ReplicateParallel  # noqa: F401
    except ImportError:
        import accelerate
        import transformers

        raise SystemExit(
            f"accelerate {accelerate.__version__} prepares a tensor-parallel model under FSDP2 with "
            f"transformers' ReplicateParallel, which transformers {transformers.__version__} does not have "
            "(transformers 4.52.2 to 5.0.0 have it; this script's tensor parallelism needs 5.0.0: "
            "pip install transformers==5.0.0)"
        ) from None


def _context_parallel_loss(acc, model, tokens):
    """The language-model loss of one microbatch; under context parallelism each GPU keeps its
    share of the sequence (accelerate's maybe_context_parallel shards the buffers in place), so
    the labels are shifted before sharding (``shift_labels``, as transformers' causal-LM loss
    takes them)."""
    nd = acc.parallelism_config
    if nd is None or not nd.cp_enabled:
        return _lm_loss(model, tokens, None)
    tokens = tokens.clone()  # sharded in place
    shift = torch.full_like(tokens, -100)
    shift[:, :-1] = tokens[:, 1:]
    positions = torch.arange(tokens.shape[1], device=tokens.device).expand_as(tokens).clone()
    buffers = [tokens, shift, positions]
    with acc.maybe_context_parallel(
        buffers=buffers, buffer_seq_dims=[1, 1, 1], no_restore_buffers=set(buffers)
    ):
        return model(input_ids=tokens, position_ids=positions, labels=tokens, shift_labels=shift).loss


def _accelerate_megatron(acc, model, optimizer, args, batches):
    """accelerate's Megatron-LM plugin: a data loader of one microbatch per sample set (its batch
    size is the micro batch) and a placeholder scheduler; ``model(**batch)`` runs the forward
    and backward passes of every microbatch and the optimizer step (accelerate's MegatronEngine)."""
    import time

    from accelerate.utils import MegatronLMDummyScheduler

    tokens, _ = batches()
    rows = tokens.repeat(args.accumulation, 1).cpu()  # one step's microbatches
    data = [{"input_ids": r, "attention_mask": torch.ones_like(r), "labels": r} for r in rows]
    loader = torch.utils.data.DataLoader(data, batch_size=args.batch)
    scheduler = MegatronLMDummyScheduler(optimizer=optimizer, total_num_steps=args.steps, warmup_num_steps=0)
    model, optimizer, loader, scheduler = acc.prepare(model, optimizer, loader, scheduler)
    times = []
    while len(times) < args.steps:
        for batch in loader:  # each call is one optimizer step
            start = time.perf_counter()
            model(**batch)
            acc.wait_for_everyone()
            times.append(time.perf_counter() - start)
            if len(times) == args.steps:
                break
    return times


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--model-config", help="JSON file of a transformers config")
    group.add_argument("--tiny", action="store_true", help="a two-layer Llama of width 64 (tests)")
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--recompute", choices=("none", "full"), default="none")
    parser.add_argument("--attention", choices=tuple(ATTENTION), default="flash", help="the attention kernel")
    parser.add_argument("--deepspeed-config", default=None, help="train with DeepSpeed and this config")
    parser.add_argument("--accelerate", action="store_true", help="train with accelerate's Accelerator")
    common_arguments(parser)
    args = parser.parse_args(argv)
    torch.manual_seed(args.seed)
    device, rank, world = setup()
    model = build(args)
    vocab = model.config.vocab_size
    tokens = torch.randint(0, vocab, (args.batch, args.seq_len), device=device)
    batches = lambda: (tokens, tokens)  # noqa: E731
    degrees: dict = {}
    if args.deepspeed_config:
        times, how = _deepspeed(model.to(device), args, device, batches), "deepspeed"
    elif args.accelerate:
        (times, degrees), how = _accelerate(model, args, batches), "accelerate"
    else:
        model, optimizer = wrap(model, args, device)
        times, how = (
            train(model, optimizer, batches, _lm_loss, args, device),
            f"{mode(args)} zero {args.zero}",
        )
    args.net = args.net or model.config.model_type
    row = log_row(
        args,
        times,
        world,
        args.seq_len,
        f"transformers {how}",
        recompute=args.recompute,
        attention=args.attention,
        **degrees,
    )
    if rank == 0:
        print(f"{args.net}: {len(times)} steps, median {row['value']} ms per step")
    finish()
    return row


if __name__ == "__main__":
    main()
