"""The model's side of the table: its PLE layers' row ids and where their tables are stored."""

from __future__ import annotations

from pathlib import Path

import torch

from ignition.model.layers.ngram_hash import row_id_function
from ignition.model.model import HybridModel
from ignition.model.weights import drop_ple_tables
from ignition.runtime.ple.delivery import (
    LayerRows,
    PleOptions,
    PleRuntime,
    delivers_rows,
    open_ple,
    resolve_residency,
)
from ignition.runtime.ple.in_graph import InGraphRows
from ignition.runtime.ple.store import open_store
from ignition.runtime.ple.table import PleTableError, TableLayout, find_layout, write_table


def ple_layers(model: HybridModel) -> list:
    """The model's PLE modules in PLE-layer order."""
    return [ple for _, ple in sorted(
        (layer.ple_index, layer.ple) for layer in model.layers if layer.ple is not None
    )]  # fmt: skip


def model_row_ids(
    model: HybridModel, scales: list[torch.Tensor | None] | None = None
) -> list[LayerRows]:
    """Per PLE layer: the model's row-id function, first global row and FP8 scale."""
    layers, first = [], 0
    for p, ple in enumerate(ple_layers(model)):
        scale = scales[p] if scales is not None else None
        layers.append(LayerRows(row_id_function(ple.hash), first, scale))
        first += ple.hash.num_rows
    return layers


def context_size(model: HybridModel) -> int:
    assert model.config.ngram_ple is not None
    return model.config.ngram_ple.ngram_size - 1


def eos_id(model: HybridModel) -> int:
    """The id the n-gram context is padded with (the hash's EOS)."""
    return ple_layers(model)[0].hash.eos_token_id


def write_model_table(model: HybridModel, folder: str | Path, num_shards: int = 4) -> TableLayout:
    """Write the model's tables as a table folder of ``num_shards`` pieces (tests, benchmark)."""
    table = torch.cat([ple.ngram_embedding.weight.detach().cpu() for ple in ple_layers(model)])
    return write_table(folder, list(torch.chunk(table, num_shards)))


def checkpoint_layout(checkpoint: str | Path, model: HybridModel) -> TableLayout | None:
    """A checkpoint's table folder, else its own PLE tensors mapped in place (None: none)."""
    return checkpoint_table(checkpoint, model)[0]


def checkpoint_table(
    checkpoint: str | Path, model: HybridModel
) -> tuple[TableLayout | None, list[torch.Tensor | None]]:
    """The table's layout and each PLE layer's FP8 scale (None: not FP8)."""
    checkpoint = Path(checkpoint)
    layers = ple_layers(model)
    if not layers:
        return None, []
    layout = find_layout(checkpoint)
    if layout is None:
        return None, []
    expected = sum(ple.hash.num_rows for ple in layers)
    if layout.num_rows != expected or layout.row_width != layers[0].ngram_embedding.embedding_dim:
        raise PleTableError(
            f"{layout.folder}: PLE table of {layout.num_rows} rows x {layout.row_width}, the "
            f"model's {len(layers)} PLE layers need {expected} x "
            f"{layers[0].ngram_embedding.embedding_dim}"
        )
    return layout, _scales(checkpoint, layout, model)


def _scales(checkpoint: Path, layout: TableLayout, model: HybridModel) -> list[torch.Tensor | None]:
    """Each PLE layer's ``ngram_embedding.weight_scale`` beside its FP8 shards, else None."""
    if layout.dtype not in (torch.float8_e4m3fn, torch.float8_e5m2):
        return [None] * len(ple_layers(model))
    from ignition.model.checkpoint_files import locate_tensors, read_tensor

    located = locate_tensors(checkpoint)
    stems = []
    for piece in layout.pieces:
        stem = piece.tensor.split(".shard_")[0].removesuffix(".weight")
        if stem not in stems:
            stems.append(stem)
    scales = []
    for stem in stems:
        name = f"{stem}.weight_scale"
        if name not in located:
            raise PleTableError(f"{checkpoint}: FP8 PLE table '{stem}' without '{name}'")
        scales.append(read_tensor(located, name))
    return scales


def open_model_ple(
    checkpoint: str | Path,
    options: PleOptions,
    device: torch.device,
    worker: object,
    model: HybridModel | None,
    release_model_table: bool = False,
    in_graph: InGraphRows | None = None,
) -> PleRuntime:
    """Serving's entry: the model's table at its residency, delivered to ``worker``."""
    if model is None or model.config.ngram_ple is None:
        return open_ple(checkpoint, options, device)
    layout, scales = checkpoint_table(checkpoint, model)
    runtime = open_ple(
        checkpoint, options, device, worker, model_row_ids(model, scales), context_size(model),
        eos_id(model), layout, in_graph,
    )  # fmt: skip
    if runtime.delivery is None and not holds_tables(model):
        raise PleTableError(
            f"{checkpoint}: the model was loaded without its n-gram table, and residency "
            f"{runtime.residency} on {device.type} does not deliver its rows"
        )
    if release_model_table and runtime.delivery is not None:
        release_tables(model)
    return runtime


def open_in_graph(
    checkpoint: str | Path, options: PleOptions, device: torch.device, model: HybridModel
) -> InGraphRows | None:
    """On CUDA with the table off the device: its store and the capturable row source; else None."""
    if device.type != "cuda" or model.config.ngram_ple is None:
        return None
    layout, scales = checkpoint_table(checkpoint, model)
    if layout is None:
        return None
    residency = resolve_residency(options, layout, device)
    if not delivers_rows(residency, device):
        return None
    store = open_store(layout, residency, device, preload=options.preloads,
                       cache_bytes=options.cache_bound)  # fmt: skip
    return InGraphRows(store, device, scales)


def delivers_table(checkpoint: str | Path, options: PleOptions, device: torch.device) -> bool:
    """Whether serving delivers the table's rows itself, so the loader leaves the tables unread."""
    layout = find_layout(checkpoint)
    return layout is not None and delivers_rows(resolve_residency(options, layout, device), device)


def holds_tables(model: HybridModel) -> bool:
    """Whether every PLE layer holds its n-gram table (a model without one: True)."""
    return all(ple.ngram_embedding.weight.shape[0] > 0 for ple in ple_layers(model))


def release_tables(model: HybridModel) -> None:
    """Drop the model's n-gram tables once the delivery serves their rows."""
    drop_ple_tables(model)
