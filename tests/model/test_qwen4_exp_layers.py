"""Issue 31, the released parts one at a time: the PLE n-gram hash is transformers' hash, the
PLE layer reads rows gathered by its caller, the QSA indexer is dense up to its budget and
selective beyond it, and bad checkpoints fail in one line naming the file and key/tensor."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from ignition.kernels import ops
from ignition.kernels.qsa_block_scores import reference as scores_reference
from ignition.kernels.qsa_sparse_attention import reference as attention_reference
from ignition.model.config import ConfigError
from ignition.model.layers.ngram_hash import build_hash, next_context, ngram_row_ids
from ignition.model.packing import PackedCapacity, PackedInputs
from ignition.model.weights import WeightsError, load_checkpoint
from tests.model.conftest import new_state
from tests.model.hf_checkpoints import EOS_TOKEN_ID, qwen4_exp_text_config

TOKENS = [5, 9, EOS_TOKEN_ID, 300, EOS_TOKEN_ID, EOS_TOKEN_ID, 17, 400, 3, 4095, 2, 7, 8, 1000]


def _reference_ngram_ids(ple_index: int) -> torch.Tensor:
    transformers = pytest.importorskip("transformers")
    from transformers.models.qwen4_exp import modeling_qwen4_exp as reference

    config = transformers.Qwen4ExpTextConfig(**qwen4_exp_text_config())
    module = reference.Qwen4ExpTextNGramEmbedding(config, 16, 0, ple_index)
    seen = {}

    def record(ids: torch.Tensor) -> torch.Tensor:
        seen["ids"] = ids
        return torch.zeros(*ids.shape, 4)

    module.ngram_embedding.forward = record
    module(torch.tensor([TOKENS]), None)
    return seen["ids"][0]


def _hash(ple_index: int):
    c = qwen4_exp_text_config()
    return build_hash(
        c["vocab_size"],
        c["ngram_size"],
        c["heads_per_ngram"],
        c["ngram_vocab_size_base"],
        c["make_ngram_vocab_size_divisible_by"],
        c["seed"],
        ple_index,
        EOS_TOKEN_ID,
    )


@pytest.mark.parametrize("ple_index", [0, 1])
def test_ngram_rows_are_transformers_rows_whole_and_in_chunks(ple_index):
    expected = _reference_ngram_ids(ple_index)
    spec = _hash(ple_index)
    fresh = torch.full((1, 2), EOS_TOKEN_ID)

    def rows(tokens: list[int], context: torch.Tensor) -> torch.Tensor:
        n = len(tokens)
        zeros = torch.zeros(n, dtype=torch.long)
        return ngram_row_ids(torch.tensor(tokens), context, zeros, torch.arange(n), spec)

    assert torch.equal(rows(TOKENS, fresh), expected)
    head = TOKENS[:5]
    carried = next_context(
        torch.tensor(head), fresh, torch.zeros(5, dtype=torch.long), torch.arange(5)
    )[-1:]
    assert torch.equal(rows(TOKENS[5:], carried), expected[5:])


def test_ngram_rows_stay_inside_each_heads_table():
    spec = _hash(1)
    ids = ngram_row_ids(
        torch.tensor(TOKENS),
        torch.full((1, 2), EOS_TOKEN_ID),
        torch.zeros(len(TOKENS), dtype=torch.long),
        torch.arange(len(TOKENS)),
        spec,
    )
    low = torch.tensor(spec.head_offsets)
    assert bool(((ids >= low) & (ids < low + torch.tensor(spec.head_sizes))).all())
    assert spec.num_rows % 8 == 0 and spec.num_rows >= sum(spec.head_sizes)


def _prompt_inputs(tokens: list[int]):
    capacity = PackedCapacity.mixed(1, 1, 64)
    return PackedInputs.build(capacity, [tokens], [0], prefill_row=0), capacity


@torch.no_grad()
def test_ple_layers_use_rows_gathered_by_the_caller(qwen4_model):
    inputs, capacity = _prompt_inputs(TOKENS)
    plain = qwen4_model.forward_packed(inputs, capacity, new_state(qwen4_model.config))
    meta = plain.meta
    contexts = torch.full((1, 2), EOS_TOKEN_ID)
    gathered = []
    for layer in qwen4_model.layers:
        if layer.ple is not None:
            gathered.append(
                layer.ple.ngram_embedding(layer.ple.row_ids(inputs.token_ids, contexts, meta))
            )
    given = qwen4_model.forward_packed(
        inputs, capacity, new_state(qwen4_model.config), ple_rows=gathered
    )
    torch.testing.assert_close(given.logits, plain.logits, atol=0, rtol=0)
    zeroed = qwen4_model.forward_packed(
        inputs,
        capacity,
        new_state(qwen4_model.config),
        ple_rows=[torch.zeros_like(g) for g in gathered],
    )
    assert not torch.allclose(zeroed.logits, plain.logits)


@torch.no_grad()
def test_indexer_is_dense_up_to_its_budget_and_selects_beyond_it(qwen4_model, monkeypatch):
    recorded = {}
    original = ops.qsa_sparse_attention

    def spy(q, k_cache, v_cache, page_table, token_row, selected, scale):
        recorded["selected"] = selected.clone()
        return original(q, k_cache, v_cache, page_table, token_row, selected, scale)

    monkeypatch.setattr(ops, "qsa_sparse_attention", spy)
    tokens = [(31 * i + 7) % 4000 + 9 for i in range(40)]
    inputs, capacity = _prompt_inputs(tokens)
    qwen4_model.forward_packed(inputs, capacity, new_state(qwen4_model.config))
    index = qwen4_model.config.qsa_indexer
    for position, selected in enumerate(recorded["selected"][: len(tokens)].tolist()):
        chosen = sorted(p for p in selected if p >= 0)
        if (position + 1) // index.compress_ratio <= index.num_blocks:  # blocks fit the budget
            assert chosen == list(range(position + 1))
            continue
        tail = list(
            range((position + 1) // index.compress_ratio * index.compress_ratio, position + 1)
        )
        assert len(chosen) == index.budget + len(tail) < position + 1
        assert set(tail) <= set(chosen)


def _edit_config(path, edit) -> None:
    config_path = path / "config.json"
    raw = json.loads(config_path.read_text())
    edit(raw)
    config_path.write_text(json.dumps(raw))


def test_a_missing_qsa_field_names_the_file_and_key(qwen4_checkpoint, tmp_path):
    path = tmp_path / "ckpt"
    shutil.copytree(qwen4_checkpoint[0], path)
    _edit_config(path, lambda raw: raw.pop("indexer_budget"))
    with pytest.raises(ConfigError, match=r"config\.json: key 'indexer_budget' missing"):
        load_checkpoint(path)


def test_a_missing_ple_shard_names_the_checkpoint_and_tensor(qwen4_checkpoint, tmp_path):
    from safetensors.torch import load_file, save_file

    path = tmp_path / "ckpt"
    shutil.copytree(qwen4_checkpoint[0], path)
    tensors = load_file(path / "model.safetensors")
    name = "model.layers.2.ple.ple_embedding.ngram_embedding.shard_3.weight"
    del tensors[name]
    save_file(tensors, str(path / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(WeightsError, match=f"missing tensor '{name}'"):
        load_checkpoint(path)


def test_ple_on_an_attention_layer_is_refused(qwen4_checkpoint, tmp_path):
    path = tmp_path / "ckpt"
    shutil.copytree(qwen4_checkpoint[0], path)
    _edit_config(path, lambda raw: raw.update(ple_layer_ids=[1, 4]))
    with pytest.raises(ConfigError, match=r"ngram_ple\.layers"):
        load_checkpoint(path)


@torch.no_grad()
def test_query_chunks_bounding_the_gathers_change_nothing(qwen4_model, monkeypatch):
    tokens = [(31 * i + 7) % 4000 + 9 for i in range(40)]
    inputs, capacity = _prompt_inputs(tokens)
    whole = qwen4_model.forward_packed(inputs, capacity, new_state(qwen4_model.config)).logits
    monkeypatch.setattr(scores_reference, "MAX_CHUNK_ELEMENTS", 1000)
    monkeypatch.setattr(attention_reference, "MAX_CHUNK_ELEMENTS", 1000)
    chunked = qwen4_model.forward_packed(inputs, capacity, new_state(qwen4_model.config)).logits
    torch.testing.assert_close(chunked, whole, atol=1e-6, rtol=0)


@torch.no_grad()
def test_the_runtime_row_id_function_gives_the_models_rows_for_a_chunk(qwen4_model):
    from ignition.model.layers.ngram_hash import row_id_function

    ple = next(layer.ple for layer in qwen4_model.layers if layer.ple is not None)
    inputs, capacity = _prompt_inputs(TOKENS)
    meta = qwen4_model.forward_packed(inputs, capacity, new_state(qwen4_model.config)).meta
    expected = ple.row_ids(inputs.token_ids, torch.full((1, 2), EOS_TOKEN_ID), meta)
    row_ids = row_id_function(ple.hash)
    head = row_ids(torch.tensor(TOKENS[:6]), torch.full((2,), EOS_TOKEN_ID))
    tail = row_ids(torch.tensor(TOKENS[6:]), torch.tensor(TOKENS[4:6]))
    assert torch.equal(torch.cat([head, tail]), expected[: len(TOKENS)])


@pytest.mark.parametrize(("rows", "parts"), [(240, 4), (10, 4), (5, 4), (7, 512), (1000, 3)])
def test_ple_shards_are_expected_as_save_pretrained_chunks_the_table(rows, parts):
    from ignition.model.families.qwen4_exp import shard_rows

    expected = [len(c) for c in torch.arange(rows).chunk(parts)]
    assert shard_rows(rows, parts) == expected


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda raw: raw.update(indexer_kv_heads=2), "key 'indexer_kv_heads' = 2: expected 1"),
        (lambda raw: raw.update(ple_layer_ids=[9]), "key 'ple_layer_ids' has 9: layers are 1..4"),
        (
            lambda raw: raw.update(layer_types=["linear_attention"] * 3 + ["sliding_attention"]),
            "key 'layer_types' has 'sliding_attention'",
        ),
        (lambda raw: raw.update(norm_topk_prob=False), "key 'norm_topk_prob' = false"),
    ],
)
def test_bad_qwen4_exp_configs_fail_in_one_line_naming_the_key(
    qwen4_checkpoint, tmp_path, edit, message
):
    path = tmp_path / "ckpt"
    shutil.copytree(qwen4_checkpoint[0], path)
    _edit_config(path, edit)
    with pytest.raises(ConfigError) as error:
        load_checkpoint(path)
    assert message in str(error.value) and "config.json" in str(error.value)
    assert "\n" not in str(error.value)
