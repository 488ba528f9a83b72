"""The in-graph mailbox's host side (docs/ple.md, GPU): a program that could not find rows
staged publishes their ids through mapped host memory, a host thread resolves them through
the row store and raises the ready flag, and the program gets exactly the store's rows; a
slow host shows in the program's wait and in ``ready - needed``. On CPU the "program" runs
the reference or the Triton kernels under the interpreter over the same buffers."""

from __future__ import annotations

import os
import threading
import time

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

from ignition.compiler.ple_input import NO_ROW, allocate_ple_rows
from ignition.kernels import ops, use_backend
from ignition.runtime.ple.graph_mailbox import GraphMailbox, device_view, uva_table
from ignition.runtime.ple.store import open_store
from ignition.runtime.ple.table import write_table

CPU = torch.device("cpu")
WIDTH = 6
DELAY_S = 0.12


@pytest.fixture
def table(tmp_path):
    values = torch.randn(40, WIDTH)
    return values, write_table(tmp_path, list(torch.chunk(values, 3)))


def program_input(mailbox: GraphMailbox, staged_ids: list[int], table_values: torch.Tensor):
    """One PLE layer's staged rows (``staged_ids`` staged) resolving misses in the graph."""
    staged = allocate_ple_rows([8], [WIDTH], [0], torch.float32, CPU)
    ids = torch.tensor(sorted(staged_ids), dtype=torch.int64)
    staged.ids[0][: len(ids)] = ids
    staged.rows[0][: len(ids)] = table_values[ids]
    staged.is_enabled = True
    staged.resolve_in_graph = lambda layer, asked: mailbox.ask(asked)
    return staged


@pytest.mark.parametrize("backend", ["reference", "triton"])
def test_the_program_gets_the_stores_rows_through_the_mapped_mailbox(table, backend):
    values, layout = table
    mailbox = GraphMailbox(open_store(layout, "disk", CPU), capacity=16, device=CPU)
    staged = program_input(mailbox, [3, 9], values)
    row_ids = torch.tensor([[3, 17], [9, 30], [39, 3]])  # 17, 30, 39 not staged
    valid = torch.tensor([True, True, True])
    with use_backend(backend):
        rows = staged.gather(0, row_ids, valid)
    mailbox.close()
    assert torch.equal(rows, values[row_ids])
    [answer] = mailbox.take_readiness()
    assert answer.ready_ns >= answer.needed_ns > 0


@pytest.mark.parametrize("backend", ["reference", "triton"])
def test_a_slow_host_shows_in_the_wait_and_in_ready_minus_needed(table, backend):
    values, layout = table
    mailbox = GraphMailbox(open_store(layout, "host", CPU), 16, CPU, delay_s=DELAY_S)
    staged = program_input(mailbox, [], values)
    began = time.perf_counter_ns()
    with use_backend(backend):
        rows = staged.gather(0, torch.tensor([[5, 6]]), torch.tensor([True]))
    waited_ns = time.perf_counter_ns() - began
    mailbox.close()
    [answer] = mailbox.take_readiness()
    assert answer.exposed_ns >= DELAY_S * 1e9
    assert waited_ns >= answer.exposed_ns
    assert torch.equal(rows, values[torch.tensor([[5, 6]])])


class _SlowForTheWorker:
    """A lock the mailbox's own thread takes slowly: widens any gap between the ready flag
    and the answer's record."""

    def __init__(self) -> None:
        self.lock = threading.Lock()

    def __enter__(self):
        if threading.current_thread().name == "ple-graph-mailbox":
            time.sleep(0.05)
        return self.lock.__enter__()

    def __exit__(self, *exc):
        return self.lock.__exit__(*exc)


def test_the_answer_is_recorded_before_the_program_sees_the_ready_flag(table):
    """The runtime takes a frame's readiness as soon as the frame completes, without
    stopping the thread (scripts/gpu_check_ple.py's dry run once lost the race)."""
    values, layout = table
    mailbox = GraphMailbox(open_store(layout, "host", CPU), 16, CPU)
    mailbox._lock = _SlowForTheWorker()
    staged = program_input(mailbox, [], values)
    staged.gather(0, torch.tensor([[5, 6]]), torch.tensor([True]))
    answers = mailbox.take_readiness()
    mailbox.close()
    assert len(answers) == 1


def test_a_frame_whose_rows_are_all_staged_asks_nothing(table):
    values, layout = table
    mailbox = GraphMailbox(open_store(layout, "host", CPU), 16, CPU)
    staged = program_input(mailbox, [1, 2], values)
    rows = staged.gather(0, torch.tensor([[1, 2], [7, 8]]), torch.tensor([True, False]))
    mailbox.close()
    assert mailbox.take_readiness() == ()
    assert torch.equal(rows[0], values[[1, 2]])


def test_padding_tokens_never_ask(table):
    values, layout = table
    mailbox = GraphMailbox(open_store(layout, "host", CPU), 16, CPU)
    staged = program_input(mailbox, [], values)
    staged.gather(0, torch.tensor([[11, 12]]), torch.tensor([False]))
    mailbox.close()
    assert int(mailbox.request[0]) == 0


@pytest.mark.parametrize("backend", ["reference", "triton"])
def test_the_uva_gather_reads_the_preloaded_table(table, backend):
    values, layout = table
    store = open_store(layout, "host", CPU, preload=True)
    mapped = uva_table(store, CPU)
    ids = torch.tensor([0, 39, NO_ROW, 13, 20])
    with use_backend(backend):
        rows = ops.gather_rows(mapped, ids, torch.full((5, WIDTH), float("nan")))
    expected = values[ids.clamp(max=39)]
    expected[2] = 0
    assert torch.equal(rows, expected)


def test_without_preload_there_is_no_table_to_gather_from(table):
    assert uva_table(open_store(table[1], "host", CPU), CPU) is None


def test_on_cpu_the_device_view_is_the_host_tensor():
    host = torch.zeros(3)
    assert device_view(host, CPU) is host
