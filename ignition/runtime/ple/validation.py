"""The build's PLE rows: validation at host or disk residency never reads the table whole."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

from ignition.runtime.ple.delivery import PleOptions, PleRuntime
from ignition.runtime.ple.in_graph import InGraphRows
from ignition.runtime.ple.model import delivers_table, open_in_graph, open_model_ple


class BuildRows:
    """``build_bundle``'s PLE row source (``compiler.build.PleRowSource``)."""

    def __init__(self, checkpoint: str | Path, options: PleOptions) -> None:
        self.checkpoint = Path(checkpoint)
        self.options = options
        self.runtime: PleRuntime | None = None
        self.in_graph: InGraphRows | None = None

    @classmethod
    def of(cls, checkpoint: str | Path, description: dict[str, Any] | None) -> BuildRows | None:
        """From the build report's ``ple`` entry (``describe_table``); None: no table."""
        if not description or description.get("table") != "n-gram":
            return None
        residency = description.get("residency")
        # No row cache at build: validation asks for each row about once.
        options = PleOptions(
            None if residency in (None, "auto") else residency, description.get("preload"), 0
        )
        return cls(checkpoint, options)

    def skips_table(self, device: torch.device) -> bool:
        """Whether the build loads the model without its tables."""
        return delivers_table(self.checkpoint, self.options, device)

    def before_capture(self, model: Any, device: torch.device) -> Callable[[Any], None] | None:
        """CUDA: the in-graph row source the captured programs bind to; None on CPU."""
        self.in_graph = open_in_graph(self.checkpoint, self.options, device, model)
        return None if self.in_graph is None else self.in_graph.bind

    def attach(self, model: Any, device: torch.device, programs: Iterable[Any]) -> None:
        """Open the table and let every program resolve its rows through the mailbox."""
        if self.in_graph is not None:  # bound before capture
            return
        holder = SimpleNamespace(ple=None)
        self.runtime = open_model_ple(self.checkpoint, self.options, device, holder, model)
        delivery = self.runtime.delivery
        if delivery is None:
            raise RuntimeError(f"{self.checkpoint}: no PLE delivery at residency "
                               f"{self.runtime.residency} on {device.type}")  # fmt: skip
        for program in programs:
            staged = getattr(program.inputs, "ple", None)
            if staged is not None:
                staged.is_enabled = True
                staged.resolve = delivery.resolve_inside

    def close(self) -> None:
        """Stop the mailbox thread (the build's last program has run)."""
        if self.runtime is not None and self.runtime.mailbox is not None:
            self.runtime.mailbox.close()
        if self.in_graph is not None:
            self.in_graph.close()
