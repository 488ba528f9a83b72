"""Load one rank's shard of a checkpoint: layout checked on a meta-device global model, then
each local parameter filled by its ``ShardRule`` (from safetensors slices where possible)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import torch
from safetensors import safe_open

from ignition.distributed.context import TensorParallel
from ignition.distributed.sharding import ShardRule, local_config, parallelize, shard_rules
from ignition.model.config import ConfigError
from ignition.model.families.base import TensorSource
from ignition.model.families.registry import family_for_checkpoint, read_config_json
from ignition.model.weights import (
    _DTYPES,
    CONFIG_FILE,
    LoadedCheckpoint,
    check_layout,
    drop_ple_tables,
    locate_tensors,
)


def load_sharded_checkpoint(
    path: str | Path,
    tp: TensorParallel,
    device: torch.device | str = "cpu",
    *,
    without_ple_tables: bool = False,
) -> LoadedCheckpoint:
    """Rank ``tp.rank``'s model of the checkpoint at ``path`` (local ``config``);
    ``without_ple_tables`` as in ``load_checkpoint``."""
    path = Path(path)
    family = family_for_checkpoint(path)
    raw = read_config_json(path / CONFIG_FILE)
    located = locate_tensors(path)
    config = family.parse_config(raw, str(path / CONFIG_FILE), frozenset(located))
    try:
        shard_config = local_config(config, tp.world_size)
    except ValueError as err:
        raise ConfigError(str(path / CONFIG_FILE), str(err)) from None
    with torch.device("meta"):
        whole = family.model_class()(config)
        layout = family.layout(whole, frozenset(located))
        readers = check_layout(whole, path, located, layout)
        rules = shard_rules(whole, config)
        model = parallelize(family.model_class()(shard_config), config, tp)
        unread = drop_ple_tables(model) if without_ple_tables else frozenset()
    model = model.to_empty(device=device).to(_DTYPES[config.torch_dtype])
    model.tie_weights()
    reader = _CheckpointReader(located, readers)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name in unread:
                continue
            value = _read(layout.sources[name], rules.get(name), reader, tp)
            if tuple(value.shape) != tuple(param.shape):
                raise ValueError(
                    f"{name}: rank {tp.rank} shard {list(value.shape)}, model {list(param.shape)}"
                )
            param.copy_(value.to(param.dtype))
    notes = family.load_notes(config, raw)
    notes.append(f"tensor parallel: rank {tp.rank} of {tp.world_size}")
    return LoadedCheckpoint(model.eval(), family, notes)


class _CheckpointReader:
    """Reads a rank's tensors; a fused tensor is read once and dropped after its last reader."""

    def __init__(self, located: dict[str, Path], readers: Counter[str]) -> None:
        self.located = located
        self.readers = Counter(readers)
        self.held: dict[str, torch.Tensor] = {}

    def get(self, name: str) -> torch.Tensor:
        tensor = self.held.get(name)
        if tensor is None:
            with safe_open(self.located[name], framework="pt") as handle:
                tensor = handle.get_tensor(name)
        self.readers[name] -= 1
        if self.readers[name] > 0:
            self.held[name] = tensor
        else:
            self.held.pop(name, None)
        return tensor

    def read_shard(self, name: str, rule: ShardRule, tp: TensorParallel) -> torch.Tensor:
        """The rank's part of a tensor stored as its parameter: only those bytes are read."""
        self.readers[name] -= 1
        with safe_open(self.located[name], framework="pt") as handle:
            return rule.read(handle.get_slice(name), tp)


def _read(
    source: TensorSource,
    rule: ShardRule | None,
    reader: _CheckpointReader,
    tp: TensorParallel,
) -> torch.Tensor:
    """One local parameter: sliced reads when the source is a stored tensor, else assembled."""
    if rule is not None and source.combine is None:
        return reader.read_shard(source.names[0], rule, tp)
    full = source.build([reader.get(name) for name in source.names])
    return full if rule is None else rule.take(full, tp)
