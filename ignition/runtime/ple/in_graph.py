"""On a GPU, the rows of a table off the device reach the captured programs (docs/ple.md)."""

from __future__ import annotations

import os
from collections.abc import Sequence

import torch

from ignition.runtime.ple.graph_mailbox import GraphMailbox, uva_table
from ignition.runtime.ple.mailbox import Readiness
from ignition.runtime.ple.store import RowStore

ENV_VAR = "IGNITION_PLE_IN_GRAPH"


def in_graph_enabled() -> bool:
    """Whether CUDA programs receive off-device rows in the graph (default: yes)."""
    return os.environ.get(ENV_VAR, "1").strip().lower() not in ("0", "false", "off", "no")


class InGraphRows:
    """The capturable row source of one rank's programs over ``store``."""

    def __init__(
        self,
        store: RowStore,
        device: torch.device,
        scales: Sequence[torch.Tensor | None] = (),
        delay_s: float = 0.0,
    ) -> None:
        self.store, self.device, self.delay_s = store, device, delay_s
        self.scales = [None if s is None else s.to(device) for s in scales]
        self.table = uva_table(store, device)  # the preloaded table, else None
        self.mailbox: GraphMailbox | None = None
        self._out: list[torch.Tensor] = []

    def bind(self, staged) -> None:
        """Before capture: size the mailbox for the programs' rows and install the resolver."""
        layout = self.store.layout
        capacities = [ids.shape[0] for ids in staged.ids]
        if self.table is None:
            self.mailbox = GraphMailbox(self.store, max(capacities), self.device,
                                        delay_s=self.delay_s)  # fmt: skip
        else:
            self._out = [torch.empty(n, layout.row_width, dtype=layout.dtype, device=self.device)
                         for n in capacities]  # fmt: skip
        staged.is_enabled = True
        staged.resolve_in_graph = self.resolve

    def resolve(self, layer: int, asked: torch.Tensor) -> torch.Tensor:
        """Rows of ``asked`` (global ids, -1 where nothing is asked) as the model uses them."""
        from ignition.kernels import ops

        if self.mailbox is not None:
            rows = self.mailbox.ask(asked)
        else:
            rows = ops.gather_rows(self.table, asked, self._out[layer][: asked.shape[0]])
        scale = self.scales[layer] if layer < len(self.scales) else None
        if scale is None:
            return rows
        from ignition.model.quant import dequantize_rows

        return dequantize_rows(rows, scale, torch.float32)

    def take_readiness(self) -> tuple[Readiness, ...]:
        """The mailbox's answers since the last call (none for the UVA gather)."""
        return () if self.mailbox is None else self.mailbox.take_readiness()

    def close(self) -> None:
        if self.mailbox is not None:
            self.mailbox.close()
