"""Issue 23: a table served off the device (host or disk residency) is never read by the
loader. Its tensors are checked (headers only) like every other, the model holds zero-row
tables, and the store maps the checkpoint's shards in place and reads rows as frames ask."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

import ignition.model.weights as weights
from ignition.runtime.ple.delivery import KnownTokens, PleOptions
from ignition.runtime.ple.model import holds_tables, open_model_ple
from ignition.runtime.ple.table import PleTableError

pytest.importorskip("transformers")

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    from tests.model.hf_checkpoints import write_qwen4_exp

    path = tmp_path_factory.mktemp("qwen4-loading")
    write_qwen4_exp(path, seed=6)
    return path


@pytest.fixture
def tensors_read(monkeypatch) -> list[str]:
    """Every checkpoint tensor the one-device loader reads (its one reader of tensor data)."""
    names: list[str] = []
    original = weights.read_tensor

    def spy(located, name):
        names.append(name)
        return original(located, name)

    monkeypatch.setattr(weights, "read_tensor", spy)
    return names


def table_reads(names: list[str]) -> list[str]:
    return [n for n in names if "ngram_embedding" in n]


def test_loading_without_the_tables_reads_no_table_tensor(checkpoint, tensors_read):
    model = weights.load_model(checkpoint, without_ple_tables=True)
    assert tensors_read and table_reads(tensors_read) == []
    assert not holds_tables(model)


def test_loading_with_the_tables_reads_them(checkpoint, tensors_read):
    """The spy above sees table reads when there are any."""
    model = weights.load_model(checkpoint)
    assert table_reads(tensors_read) != []
    assert holds_tables(model)


def test_every_other_parameter_is_loaded_as_before(checkpoint):
    whole = dict(weights.load_model(checkpoint).named_parameters())
    without = dict(weights.load_model(checkpoint, without_ple_tables=True).named_parameters())
    assert set(whole) == set(without)
    differ = [n for n in whole if not n.endswith(weights.PLE_TABLE_PARAMETER)
              and not torch.equal(whole[n], without[n])]  # fmt: skip
    assert differ == []


@pytest.mark.parametrize("residency", ["host", "disk"])
def test_the_store_reads_rows_as_frames_ask(checkpoint, tensors_read, residency):
    model = weights.load_model(checkpoint, without_ple_tables=True)
    worker = SimpleNamespace(ple=None)  # open_ple hands a worker without attach_ple its delivery
    ple = open_model_ple(checkpoint, PleOptions(residency), CPU, worker, model)
    assert worker.ple is ple.delivery is not None
    assert ple.stats.snapshot().bytes_moved == 0  # opened: nothing read yet
    [delivery] = ple.delivery.publish_tokens([KnownTokens((5, 6, 7), (1, 2))])
    [rows] = ple.delivery.await_rows([delivery])
    ple.delivery.finish([delivery])
    ple.mailbox.close()
    assert len(rows) == len(delivery.row_ids) > 0
    assert 0 < ple.stats.snapshot().bytes_moved < ple.stats.snapshot().table_bytes
    assert table_reads(tensors_read) == []


def test_a_model_without_its_tables_is_refused_where_no_delivery_serves_them(checkpoint):
    model = weights.load_model(checkpoint, without_ple_tables=True)
    with pytest.raises(PleTableError, match="without its n-gram table"):
        open_model_ple(checkpoint, PleOptions("device"), CPU, SimpleNamespace(ple=None), model)
