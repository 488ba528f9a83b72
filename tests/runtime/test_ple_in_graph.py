"""The captured programs' row source on a GPU (docs/ple.md), run on CPU: bound to the
programs' PLE input before capture, it serves missing rows from the preloaded table by the
UVA gather (no host, no stall) or else through the in-graph mailbox, whose slow answers are
reported as the frame's readiness stall even where the host's known-row wait is not
(``inside_interval`` false, as on CUDA)."""

from __future__ import annotations

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

from ignition.compiler.ple_input import allocate_ple_rows
from ignition.kernels import use_backend
from ignition.runtime.ple.delivery import FrameDelivery, modulo_row_ids
from ignition.runtime.ple.in_graph import InGraphRows, in_graph_enabled
from ignition.runtime.ple.mailbox import Mailbox
from ignition.runtime.ple.store import open_store
from ignition.runtime.ple.table import write_table

CPU = torch.device("cpu")
DELAY_S = 0.1


@pytest.fixture
def table(tmp_path):
    values = torch.randn(48, 5)
    return values, write_table(tmp_path, list(torch.chunk(values, 2)))


def bound(rows: InGraphRows):
    staged = allocate_ple_rows([6], [5], [0], torch.float32, CPU)
    rows.bind(staged)
    return staged


@pytest.mark.parametrize("preload", [True, False], ids=["uva-gather", "mailbox"])
def test_bound_programs_get_the_tables_rows(table, preload):
    values, layout = table
    rows = InGraphRows(open_store(layout, "host", CPU, preload=preload), CPU)
    staged = bound(rows)
    ids = torch.tensor([[1, 47], [20, 3]])
    with use_backend("triton"):
        got = staged.gather(0, ids, torch.tensor([True, True]))
    rows.close()
    assert staged.is_enabled and torch.equal(got, values[ids])
    assert (rows.mailbox is None) == preload


def test_the_uva_gather_never_waits_for_the_host(table):
    _, layout = table
    rows = InGraphRows(open_store(layout, "host", CPU, preload=True), CPU, delay_s=DELAY_S)
    bound(rows).gather(0, torch.tensor([[4, 5]]), torch.tensor([True]))
    assert rows.take_readiness() == ()


def test_a_slow_mailbox_answer_is_the_frames_stall_on_a_gpu(table):
    _, layout = table
    store = open_store(layout, "disk", CPU)
    rows = InGraphRows(store, CPU, delay_s=DELAY_S)
    staged = bound(rows)
    delivery = FrameDelivery(Mailbox(store), modulo_row_ids(2, 48), 2, 0, inside_interval=False,
                             in_graph=rows)  # fmt: skip
    staged.gather(0, torch.tensor([[7, 30]]), torch.tensor([True]))
    readiness, stall_ns = delivery.finish([])
    rows.close()
    delivery.mailbox.close()
    assert len(readiness) == 1 and stall_ns == readiness[0].exposed_ns >= DELAY_S * 1e9


def test_the_in_graph_path_can_be_switched_off(monkeypatch):
    monkeypatch.setenv("IGNITION_PLE_IN_GRAPH", "0")
    assert not in_graph_enabled()
    monkeypatch.delenv("IGNITION_PLE_IN_GRAPH")
    assert in_graph_enabled()


def test_on_cuda_a_table_off_the_device_is_delivered_unless_switched_off(monkeypatch):
    from ignition.runtime.ple.delivery import delivers_rows

    cuda = torch.device("cuda")
    assert delivers_rows("host", cuda) and delivers_rows("disk", cuda)
    assert not delivers_rows("device", cuda)
    monkeypatch.setenv("IGNITION_PLE_IN_GRAPH", "0")
    assert not delivers_rows("disk", cuda) and delivers_rows("disk", CPU)
