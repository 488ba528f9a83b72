"""The host's prompt-row gather that both engines wait for (docs/devices.md, "PLE rows"):
on a device with ``prompt_ready_ms`` the host gathers each prompt's PLE rows before its
first chunk, one prompt after another, beside the device; the engines start a gather once
a slot is free for it. Devices without it deliver a prompt's rows at once."""

from __future__ import annotations

from ignition.simulate.devices import DeviceModel
from ignition.simulate.results import RequestRecord


class HostGather:
    """One FIFO of prompt-row gathers, in ms; each request's record keeps its gather."""

    def __init__(self, device: DeviceModel) -> None:
        self.cost = getattr(device, "prompt_ready_ms", None)
        self.free_ms = 0.0  # the host is busy gathering until then

    @property
    def delivers(self) -> bool:
        """Whether prompts wait for a gather at all."""
        return self.cost is not None

    def gather(self, record: RequestRecord, prompt_tokens: int, now_ms: float) -> float:
        """Starts a prompt's gather at ``now_ms``, or once the gather ahead of it ends;
        returns when its rows are on the device (``record.prompt_rows_ms`` keeps both)."""
        if self.cost is None:
            return now_ms
        start = max(now_ms, self.free_ms)
        self.free_ms = start + self.cost(prompt_tokens)
        record.prompt_rows_ms = (start, self.free_ms)
        return self.free_ms
