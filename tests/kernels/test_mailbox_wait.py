"""The in-graph PLE mailbox wait (docs/ple.md): the program publishes its row ids into host
memory, raises the request flag to a fresh sequence number and returns only once a host
thread has written that number into the ready flag; the reference and the kernel (under
the interpreter on CPU) behave alike. The interpreter reads the flag's live memory: a kernel
that saw a snapshot would spin to ``max_spins`` and report TIMED_OUT."""

from __future__ import annotations

import threading
import time

import pytest
import torch

from ignition.kernels.mailbox_wait import reference
from ignition.kernels.mailbox_wait import triton as kernel
from ignition.kernels.mailbox_wait.reference import ASKED_NOTHING, READY, TIMED_OUT

DELAY_S = 0.15
IMPLEMENTATIONS = {"reference": reference.publish_and_wait, "triton": kernel.publish_and_wait}


def mailbox(device: torch.device, capacity: int = 8):
    """(mailbox ids, request, ready) in host memory; (sequence, status) on ``device``."""
    return (torch.full((capacity,), -7, dtype=torch.int64), torch.zeros(2, dtype=torch.int64),
            torch.zeros(1, dtype=torch.int64), torch.zeros(1, dtype=torch.int64, device=device),
            torch.zeros(1, dtype=torch.int32, device=device))  # fmt: skip


class SlowHost(threading.Thread):
    """Answers the first request after DELAY_S: records what it saw and when it answered."""

    def __init__(self, ids: torch.Tensor, request: torch.Tensor, ready: torch.Tensor) -> None:
        super().__init__(daemon=True)
        self.ids, self.request, self.ready = ids, request, ready
        self.seen_ids: list[int] = []
        self.answered_ns = 0

    def run(self) -> None:
        while int(self.request[0]) == 0:
            time.sleep(1e-4)
        asked = int(self.request[0])
        self.seen_ids = self.ids[: int(self.request[1])].tolist()
        time.sleep(DELAY_S)
        self.answered_ns = time.perf_counter_ns()
        self.ready[0] = asked


@pytest.mark.parametrize("name", sorted(IMPLEMENTATIONS))
def test_the_wait_returns_only_after_the_host_sets_the_ready_flag(name):
    ids, request, ready, sequence, status = mailbox(torch.device("cpu"))
    host = SlowHost(ids, request, ready)
    host.start()
    wanted = torch.tensor([4, -1, 9], dtype=torch.int64)
    IMPLEMENTATIONS[name](wanted, ids, request, ready, sequence, status, 10**8)
    returned_ns = time.perf_counter_ns()
    host.join(timeout=5)
    assert int(status[0]) == READY
    assert returned_ns >= host.answered_ns > 0
    assert host.seen_ids == [4, -1, 9]
    assert int(sequence[0]) == int(request[0]) == 1


@pytest.mark.parametrize("name", sorted(IMPLEMENTATIONS))
def test_each_ask_uses_a_fresh_sequence_number(name):
    ids, request, ready, sequence, status = mailbox(torch.device("cpu"))
    ready[0] = 1  # the previous ask's answer must not satisfy the next one
    sequence[0] = 1
    IMPLEMENTATIONS[name](torch.tensor([3]), ids, request, ready, sequence, status, 50)
    assert int(request[0]) == 2 and int(status[0]) == TIMED_OUT


@pytest.mark.parametrize("name", sorted(IMPLEMENTATIONS))
def test_a_frame_needing_nothing_neither_asks_nor_waits(name):
    ids, request, ready, sequence, status = mailbox(torch.device("cpu"))
    IMPLEMENTATIONS[name](torch.tensor([-1, -1]), ids, request, ready, sequence, status, 10**8)
    assert int(status[0]) == ASKED_NOTHING and int(request[0]) == 0 and int(sequence[0]) == 0


def test_the_kernel_and_the_reference_publish_the_same_ids():
    wanted = torch.tensor([5, -1, 2, 2, 8], dtype=torch.int64)
    published = []
    for name in sorted(IMPLEMENTATIONS):
        ids, request, ready, sequence, status = mailbox(torch.device("cpu"))
        IMPLEMENTATIONS[name](wanted, ids, request, ready, sequence, status, 10)
        published.append((ids.tolist(), request.tolist()))
    assert published[0] == published[1] == ([5, -1, 2, 2, 8, -7, -7, -7], [1, 5])


def test_a_mailbox_too_small_for_the_ids_is_one_line():
    ids, request, ready, sequence, status = mailbox(torch.device("cpu"), capacity=2)
    with pytest.raises(ValueError, match="mailbox of 2 ids, 3 asked"):
        kernel.publish_and_wait(torch.tensor([1, 2, 3]), ids, request, ready, sequence,
                                status, 1)  # fmt: skip
