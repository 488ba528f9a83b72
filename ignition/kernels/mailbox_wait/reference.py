"""PyTorch reference of the in-graph PLE mailbox wait: publish ids, raise ``request[0]`` to a
fresh sequence, spin until ``ready[0]`` equals it; all-padding ids do not ask (docs/ple.md)."""

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
    """Publish ``row_ids`` [N] int64 (padding negative) to ``mailbox_ids`` [>= N] and wait.

    Shapes:
    request [2], ready [1]: mapped int64 flags; sequence [1] int64 on the device, incremented
    per ask; status [1] int32 out (READY, TIMED_OUT or ASKED_NOTHING). Returns ``status``.
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
