"""Bundle loading details that the build tests do not reach."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from tokenizers import Tokenizer, models

from ignition.compiler import fingerprint
from ignition.runtime import bundle
from ignition.runtime.bundle import BundleError, _eos_ids, verify_checkpoint


def tokenizer_with(vocab: dict[str, int]) -> Tokenizer:
    return Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))


@pytest.mark.parametrize(
    ("configured", "expected"), [(2, (2, 7)), ([2, 0], (0, 2, 7)), (None, (7,))]
)
def test_end_of_sequence_ids_come_from_config_and_tokenizer(configured, expected):
    model = SimpleNamespace(config=SimpleNamespace(eos_token_id=configured))
    tokenizer = tokenizer_with({"<unk>": 1, "<|im_end|>": 7})
    assert _eos_ids(tokenizer, {"eos_token": "<|im_end|>"}, model) == expected


def _checkpoint(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "model.safetensors").write_bytes(b"\0" * 4096)
    return tmp_path, {
        "sha256": fingerprint.checkpoint_sha256(tmp_path),
        "files": [s.to_json() for s in fingerprint.checkpoint_stamps(tmp_path)],
    }


def test_serving_checks_stamps_without_reading_a_weight_byte(tmp_path, monkeypatch):
    path, record = _checkpoint(tmp_path)

    def no_hash(_path):
        raise AssertionError("the checkpoint was hashed at start-up")

    monkeypatch.setattr(bundle, "checkpoint_sha256", no_hash)
    verify_checkpoint(path, record, verify_weights=False)


def test_a_resized_weight_file_is_refused_by_the_stamp_check(tmp_path):
    path, record = _checkpoint(tmp_path)
    (path / "model.safetensors").write_bytes(b"\0" * 10)
    with pytest.raises(BundleError, match="size 10 bytes, 4096 at build"):
        verify_checkpoint(path, record, verify_weights=False)


def test_verify_weights_accepts_a_touched_file_whose_content_is_unchanged(tmp_path):
    import os

    path, record = _checkpoint(tmp_path)
    os.utime(path / "model.safetensors", ns=(1, 1))
    with pytest.raises(BundleError, match="modified since the build"):
        verify_checkpoint(path, record, verify_weights=False)
    verify_checkpoint(path, record, verify_weights=True)


def test_a_bundle_without_stamps_is_verified_by_its_hash(tmp_path):
    path, record = _checkpoint(tmp_path)
    with pytest.raises(BundleError, match="differs from the built"):
        verify_checkpoint(path, {"sha256": "f" * 64}, verify_weights=False)
    verify_checkpoint(path, {"sha256": record["sha256"]}, verify_weights=False)
