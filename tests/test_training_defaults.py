"""The zoo transformers' published training runs (configs/nets/*.json ``training``) as the
catalog reads them: each cited value pinned, the keys consistent, malformed values rejected."""

from __future__ import annotations

import json
import math
import re
import shutil

import pytest

from planner import catalog
from planner.errors import CatalogError
from planner.training_defaults import BATCH_TOKENS_TOLERANCE, TrainingDefaults

GPT2 = "cdn.openai.com/better-language-models/language_models_are_unsupervised_multitask_learners.pdf"
GPT3 = "arxiv.org/abs/2005.14165"
BERT = "arxiv.org/abs/1810.04805"
LLAMA3 = "arxiv.org/abs/2407.21783"
LLAMA3_CARD = "github.com/meta-llama/llama3/blob/13e795f906b6b46c585f558854e2177f74e49525/MODEL_CARD.md"
NEMO = "github.com/NVIDIA/NeMo/blob/8cfedd7203462cb251a914e700e5605444277561/nemo/collections/llm/recipes/"
MIXTRAL = "arxiv.org/abs/2401.04088"
LLAMA2_CARD = "github.com/meta-llama/llama/blob/0e3444bca7a3e02f25f2c9f9e778866fecdae567/MODEL_CARD.md"
DEEPSEEK_V3 = "arxiv.org/abs/2412.19437"

# net -> (seq_len, tokens, global_batch in sequences, global_batch_tokens, where tokens and batch were read)
CITED = {
    # Radford et al. 2019: context 1,024, "a larger batchsize of 512"; no steps or tokens published
    "gpt2-xl": (1024, None, 512, 524_288, (GPT2, GPT2)),
    # Brown et al. 2020, Table 2.1: 300B tokens, n_ctx 2,048, 3.2M tokens per step for 175B
    "gpt3-175b": (2048, 300_000_000_000, 1536, 3_200_000, (GPT3, GPT3)),
    # Devlin et al. 2019, A.2: 1,000,000 steps of 256 x 512 ("128,000 tokens/batch")
    "bert-large": (512, 131_072_000_000, 256, 131_072, (BERT, BERT)),
    # Meta's model card: 15T+ tokens, 8k context; NVIDIA NeMo's recipes: 512 x 8,192 per step
    "llama3-8b": (8192, 15_000_000_000_000, 512, 4_194_304, (LLAMA3_CARD, NEMO + "llama3_8b.py")),
    "llama3-70b": (8192, 15_000_000_000_000, 512, 4_194_304, (LLAMA3_CARD, NEMO + "llama3_70b.py")),
    # Meta's Llama 2 card: 2.0T tokens, 4k context, "a global batch-size of 4M tokens" (1,024 x 4,096)
    "llama2-70b": (4096, 2_000_000_000_000, 1024, 4_194_304, (LLAMA2_CARD, LLAMA2_CARD)),
    # Llama 3 paper: 15.6T tokens in 8,192-token sequences, 16M tokens per step (Section 3.4.1)
    "llama3.1-405b": (8192, 15_600_000_000_000, 2048, 16_777_216, (LLAMA3, LLAMA3)),
    # Jiang et al. 2024: trained with a 32k context; tokens and batch unpublished
    "mixtral-8x7b": (32768, None, None, None, (MIXTRAL, None)),
    # DeepSeek-V3 report: 14.8T tokens (abstract), 4K sequences and 15,360 after the ramp (§4.2)
    "deepseek-v3": (4096, 14_800_000_000_000, 15360, 62_914_560, (DEEPSEEK_V3, DEEPSEEK_V3)),
}


def test_every_zoo_transformer_is_pinned():
    assert set(CITED) == set(catalog.zoo_transformers())


@pytest.mark.parametrize("net", sorted(CITED))
def test_cited_values(net):
    seq, tokens, batch, batch_tokens, (where_tokens, where_batch) = CITED[net]
    t = catalog.training(net)
    assert isinstance(t, TrainingDefaults) and t.net == net
    assert (t.seq_len, t.tokens, t.global_batch, t.global_batch_tokens) == (seq, tokens, batch, batch_tokens)
    assert where_tokens in t.source
    if where_batch:
        assert where_batch in t.global_batch_tokens_source
    if tokens is not None:  # one pass (or BERT's 40) over sequences of seq_len tokens
        assert t.dataset_size == math.ceil(tokens / (t.epochs * seq))


def test_llama3_batches_name_the_recipe_and_meta_405b_schedule():
    """Meta publishes no 8B/70B batch: the default is NVIDIA's recipe (512 x 8,192), and the source
    quotes the Llama 3 paper's 405B schedule (4M, 8M after 252M tokens, 16M after 2.87T)."""
    for net in ("llama3-8b", "llama3-70b"):
        t = catalog.training(net)
        assert t.global_batch * t.seq_len == t.global_batch_tokens == 4 * 2**20
        for fragment in ("NVIDIA NeMo", LLAMA3, "4M tokens per step", "8M after 252M", "16M after 2.87T"):
            assert fragment in t.global_batch_tokens_source, (net, fragment)
        assert "not Meta's run" in t.note


def test_unpublished_values_are_absent_and_said_so():
    mixtral = catalog.training("mixtral-8x7b")
    assert mixtral.tokens is None and mixtral.global_batch_tokens is None and mixtral.dataset_size is None
    assert "publish neither the training tokens nor the global batch" in mixtral.note
    gpt2 = catalog.training("gpt2-xl")
    assert gpt2.tokens is None and "neither the training steps nor the tokens" in gpt2.note
    assert "128 tokens" in catalog.training("bert-large").note  # 90% of BERT's steps were shorter


@pytest.mark.parametrize("net", sorted(CITED))
def test_every_number_has_a_dated_url(net):
    t = catalog.training(net)
    pairs = [
        (t.tokens, t.source),
        (t.global_batch, t.global_batch_source),
        (t.global_batch_tokens, t.global_batch_tokens_source),
    ]
    for value, source in pairs:
        if value is not None:
            assert re.search(r"https?://", source) and re.search(r"read 20\d\d-\d\d-\d\d", source), source


def test_batch_in_sequences_and_tokens_agree_within_the_stated_rounding():
    """GPT-3's 3.2M is 1,562.5 sequences of 2,048; its 1,536 is 1.7% short. Everywhere else exact."""
    for net in CITED:
        t = catalog.training(net)
        if t.global_batch and t.global_batch_tokens:
            ratio = t.global_batch * t.seq_len / t.global_batch_tokens
            assert abs(ratio - 1) <= BATCH_TOKENS_TOLERANCE, net
            assert ratio == 1 or net == "gpt3-175b", net


def test_cnns_keep_their_image_training_and_no_tokens():
    t = catalog.training("resnet50")
    assert (t.dataset_size, t.epochs, t.tokens, t.seq_len) == (1_281_167, 90, None, None)


# ---- malformed training sections ---------------------------------------------------------------


@pytest.fixture
def llama_copy(tmp_path, monkeypatch):
    """configs/nets/llama3-8b.json alone in a private configs folder; returns a writer of its
    training section."""
    nets = tmp_path / "configs" / "nets"
    nets.mkdir(parents=True)
    src = catalog.zoo()["llama3-8b"]
    shutil.copy(src, nets / src.name)
    monkeypatch.setenv("PLANNER_CONFIGS", str(tmp_path / "configs"))

    def write(**changes):
        spec = json.loads(src.read_text())
        for key, value in changes.items():
            if value is ...:
                del spec["training"][key]
            else:
                spec["training"][key] = value
        (nets / src.name).write_text(json.dumps(spec))

    return write


@pytest.mark.parametrize(
    "changes,fragment",
    [
        ({"tokens": -5}, "training.tokens = -5 (want a positive whole number)"),
        ({"tokens": "15T"}, "training.tokens = '15T' (want a positive whole number)"),
        ({"tokens": True}, "training.tokens = True"),
        ({"global_batch_tokens": 4194304.5}, "training.global_batch_tokens = 4194304.5"),
        ({"epochs": float("nan")}, "training.epochs = nan (want a positive finite number)"),
        ({"epochs": float("inf")}, "training.epochs = inf"),
        ({"seq_len": 4096}, "training.seq_len = 4096 (want the model's seq_len, 8192)"),
        (
            {"dataset_size": 123},
            "training.dataset_size = 123 (want ceil(tokens / (epochs x seq_len)) = 1831054688)",
        ),
        (
            {"global_batch_tokens": 8388608},
            "training.global_batch_tokens = 8388608 (want global_batch x seq_len",
        ),
        (
            {"global_batch_tokens_source": ...},
            "training.global_batch_tokens = 4194304 has no training.global",
        ),
        ({"global_batch_source": ""}, "training.global_batch_source = '' (want a non-empty string)"),
        ({"tokenz": 1}, "training has unknown key(s) tokenz (valid: dataset_size"),
    ],
)
def test_a_malformed_value_is_one_line_naming_net_key_and_value(llama_copy, changes, fragment):
    llama_copy(**changes)
    for read in (lambda: catalog.training("llama3-8b"), catalog.zoo_info):
        with pytest.raises(CatalogError) as info:
            read()
        msg = str(info.value)
        assert "\n" not in msg and msg.startswith("net 'llama3-8b': "), msg
        assert fragment in msg, msg


def test_the_cli_turns_a_malformed_section_into_exit_2(llama_copy, capsys):
    from planner.cli import main

    llama_copy(tokens=0)
    code = main(["list", "nets"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.strip() == "error: net 'llama3-8b': training.tokens = 0 (want a positive whole number)"
