"""The PLE n-gram table's residency and delivery (docs/ple.md)."""

from __future__ import annotations

from ignition.runtime.ple.cache import RowCache
from ignition.runtime.ple.delivery import (
    NO_TABLE,
    FrameDelivery,
    LayerRows,
    PleOptions,
    PleRuntime,
    delivers_rows,
    describe_table,
    open_ple,
    parse_bytes,
    resolve_residency,
)
from ignition.runtime.ple.in_graph import InGraphRows, in_graph_enabled
from ignition.runtime.ple.mailbox import Delivery, Mailbox, Readiness, aggregate_exposed_ns
from ignition.runtime.ple.model import (
    checkpoint_table,
    context_size,
    delivers_table,
    eos_id,
    holds_tables,
    model_row_ids,
    open_in_graph,
    open_model_ple,
    ple_layers,
    write_model_table,
)
from ignition.runtime.ple.stats import PleSnapshot, PleStats
from ignition.runtime.ple.store import (
    DEFAULT_CACHE_BYTES,
    RESIDENCIES,
    RowStore,
    choose_residency,
    open_store,
)
from ignition.runtime.ple.table import (
    TABLE_FOLDER,
    PleTableError,
    TableLayout,
    find_layout,
    read_layout,
    write_table,
)
from ignition.runtime.ple.validation import BuildRows

__all__ = [
    "DEFAULT_CACHE_BYTES",
    "NO_TABLE",
    "RESIDENCIES",
    "TABLE_FOLDER",
    "BuildRows",
    "Delivery",
    "FrameDelivery",
    "InGraphRows",
    "LayerRows",
    "Mailbox",
    "PleOptions",
    "PleRuntime",
    "PleSnapshot",
    "PleStats",
    "PleTableError",
    "Readiness",
    "RowCache",
    "RowStore",
    "TableLayout",
    "aggregate_exposed_ns",
    "checkpoint_table",
    "choose_residency",
    "context_size",
    "delivers_rows",
    "delivers_table",
    "describe_table",
    "eos_id",
    "find_layout",
    "holds_tables",
    "in_graph_enabled",
    "model_row_ids",
    "open_in_graph",
    "open_model_ple",
    "open_ple",
    "open_store",
    "parse_bytes",
    "ple_layers",
    "read_layout",
    "resolve_residency",
    "write_model_table",
    "write_table",
]
