"""PyTorch reference of the in-graph PLE mailbox wait (docs/ple.md).

A captured program cannot call back into Python, so a row it could not find staged (a draft
made inside a speculative round, a pending token the host has not read) is asked for
through memory both sides see: the program copies its row ids into a mapped host buffer,
raises a mapped request flag to a fresh sequence number (kept on the device, so every graph
replay asks anew without the host writing device memory), and spins on a mapped ready flag
until the host worker (``runtime.ple.graph_mailbox``) has staged the rows and written the
same sequence number there. The wait is device time inside the replay interval, which is
what the frame's readiness timestamps then explain to Helios.

A frame that needs nothing (every id is padding, negative) neither asks nor waits. The spin
is bounded (``max_spins``) so that a host worker that died cannot hang the device forever;
``status`` says which way the wait ended.

Flag layout (int64): ``request[0]`` the sequence asked, ``request[1]`` the number of ids
published; ``ready[0]`` the last sequence the host staged.
"""

from __future__ import annotations

import torch

ASKED_NOTHING = 2  # status: every id was padding
READY = 1  # status: the host staged the rows
TIMED_OUT = 0  # status: max_spins polls saw no ready flag


def publish_and_wait(
    row_ids: torch.Tensor,
    mailbox_ids: torch.Tensor,
    request: torch.Tensor,
    ready: torch.Tensor,
    sequence: torch.Tensor,
    status: torch.Tensor,
    max_spins: int,
) -> torch.Tensor:
    """Publish ``row_ids`` and wait for the host's ready flag.

    Shapes:
        row_ids: [N] int64, the ids the program needs (padding: negative);
        mailbox_ids: [>= N] int64, mapped host memory the host worker reads;
        request: [2] int64 mapped (sequence asked, ids published); ready: [1] int64 mapped;
        sequence: [1] int64 on the program's device, incremented per ask;
        status: [1] int32 out: READY, TIMED_OUT or ASKED_NOTHING; max_spins: polls at most.
    Returns ``status``.
    """
    num_ids = row_ids.shape[0]
    mailbox_ids[:num_ids].copy_(row_ids)
    if not bool((row_ids >= 0).any()):
        status.fill_(ASKED_NOTHING)
        return status
    asked = int(sequence[0]) + 1
    sequence.fill_(asked)
    request[1] = num_ids
    request[0] = asked  # the publish: the ids and the count are written first
    seen, spins = int(ready[0]), 0
    while seen != asked and spins < max_spins:
        seen = int(ready[0])  # a fresh read of the flag's memory every poll
        spins += 1
    status.fill_(READY if seen == asked else TIMED_OUT)
    return status
