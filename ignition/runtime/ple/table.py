"""The PLE n-gram table on disk: ``shard_N.safetensors`` pieces plus ``table.json``."""

from __future__ import annotations

import json
import re
import struct
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

INDEX_FILE = "table.json"
# Where a checkpoint (or bundle) keeps its table: <checkpoint>/ngram_table/.
TABLE_FOLDER = "ngram_table"
DEFAULT_TENSOR = "table"

_DTYPES: dict[str, torch.dtype] = {
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "F8_E4M3": torch.float8_e4m3fn,
    "F8_E5M2": torch.float8_e5m2,
}
_NAMES = {v: k for k, v in _DTYPES.items()}


class PleTableError(ValueError):
    """A table folder that cannot be served (the message is one line naming the file)."""


def shard_name(index: int) -> str:
    return f"shard_{index}.safetensors"


@dataclass(frozen=True)
class TablePiece:
    """One piece: its rows ``[first_row, first_row + num_rows)`` of the global table."""

    path: Path
    tensor: str
    first_row: int
    num_rows: int
    data_offset: int  # byte offset of the tensor's data in the file


@dataclass(frozen=True)
class TableLayout:
    folder: Path
    pieces: tuple[TablePiece, ...]
    row_width: int
    dtype: torch.dtype

    @property
    def num_rows(self) -> int:
        return sum(p.num_rows for p in self.pieces)

    @property
    def row_bytes(self) -> int:
        return self.row_width * torch.empty((), dtype=self.dtype).element_size()

    @property
    def table_bytes(self) -> int:
        return self.num_rows * self.row_bytes

    def map_pieces(self) -> list[torch.Tensor]:
        """Each piece as a read-only ``[rows, row_width]`` tensor over the mapped file."""
        mapped = []
        for p in self.pieces:
            raw = np.memmap(
                p.path, dtype=np.uint8, mode="r", offset=p.data_offset,
                shape=(p.num_rows * self.row_bytes,),
            )  # fmt: skip
            with warnings.catch_warnings():  # read-only mapping; nothing writes through it
                warnings.simplefilter("ignore", UserWarning)
                tensor = torch.frombuffer(memoryview(raw), dtype=torch.uint8)
            mapped.append(tensor.view(self.dtype).view(p.num_rows, self.row_width))
        return mapped


def find_layout(checkpoint: str | Path) -> TableLayout | None:
    """The checkpoint's n-gram table, or None for a model without one."""
    folder = Path(checkpoint) / TABLE_FOLDER
    if (folder / INDEX_FILE).exists():
        return read_layout(folder)
    return checkpoint_layout(checkpoint)


# A PLE layer's table as transformers saves Qwen3.8-Flash-Next: one tensor, or row shards.
PLE_TENSOR = re.compile(
    r"layers\.(\d+)\.ple\.ple_embedding\.ngram_embedding(?:\.shard_(\d+))?\.weight$"
)


def checkpoint_layout(checkpoint: str | Path) -> TableLayout | None:
    """A checkpoint's own PLE tensors mapped in place, layers and shards in order (None: none)."""
    from ignition.model.checkpoint_files import WeightsError, locate_tensors

    try:
        located = locate_tensors(Path(checkpoint))
    except WeightsError:
        return None
    found = sorted(
        (int(m.group(1)), int(m.group(2) or 0), name)
        for name in located
        if (m := PLE_TENSOR.search(name)) is not None
    )
    if not found:
        return None
    first_path, first_name = located[found[0][2]], found[0][2]
    entry = _header(first_path).get(first_name, {})
    dtype, shape = _DTYPES.get(entry.get("dtype", "")), entry.get("shape", [])
    if dtype is None or len(shape) != 2:
        raise PleTableError(f"PLE table tensor '{first_name}' in {first_path}: {entry!r}")
    pieces, first = [], 0
    for _, _, name in found:
        piece = _read_piece(located[name], name, first, int(shape[1]), dtype)
        pieces.append(piece)
        first += piece.num_rows
    return TableLayout(Path(checkpoint), tuple(pieces), int(shape[1]), dtype)


def _header(path: Path) -> dict:
    with path.open("rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(size))


def read_layout(folder: str | Path) -> TableLayout:
    """The table in ``folder`` from ``table.json`` and the pieces' headers."""
    folder = Path(folder)
    index_path = folder / INDEX_FILE
    try:
        index = json.loads(index_path.read_text())
        num_shards = int(index["num_shards"])
        tensor = str(index.get("tensor", DEFAULT_TENSOR))
        row_width = int(index["row_width"])
        dtype = _DTYPES[index["dtype"]]
    except FileNotFoundError:
        raise PleTableError(f"{index_path}: no PLE table index") from None
    except (KeyError, ValueError, TypeError, json.JSONDecodeError) as err:
        raise PleTableError(f"{index_path}: bad PLE table index ({err!r})") from None
    pieces, first = [], 0
    for i in range(num_shards):
        piece = _read_piece(folder / shard_name(i), tensor, first, row_width, dtype)
        pieces.append(piece)
        first += piece.num_rows
    return TableLayout(folder, tuple(pieces), row_width, dtype)


def _read_piece(
    path: Path, tensor: str, first_row: int, row_width: int, dtype: torch.dtype
) -> TablePiece:
    where = f"PLE table shard {path} (tensor '{tensor}')"
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise PleTableError(f"{where}: truncated: no safetensors header")
            (header_len,) = struct.unpack("<Q", head)
            raw = f.read(header_len)
    except FileNotFoundError:
        raise PleTableError(f"{where}: missing") from None
    if len(raw) < header_len:
        raise PleTableError(f"{where}: truncated inside its header")
    try:
        header = json.loads(raw)
    except json.JSONDecodeError:
        raise PleTableError(f"{where}: unreadable safetensors header") from None
    entry = header.get(tensor)
    if entry is None:
        raise PleTableError(f"{where}: no such tensor (has {sorted(header)[:4]})")
    shape, begin, end = entry["shape"], *entry["data_offsets"]
    if len(shape) != 2 or shape[1] != row_width or _DTYPES.get(entry["dtype"]) != dtype:
        raise PleTableError(
            f"{where}: {entry['dtype']} {shape}, the index says {_NAMES[dtype]} [rows, {row_width}]"
        )
    data_offset = 8 + header_len + begin
    if size < 8 + header_len + end:
        raise PleTableError(
            f"{where}: truncated: the header promises {8 + header_len + end} bytes, "
            f"the file has {size}"
        )
    return TablePiece(path, tensor, first_row, int(shape[0]), data_offset)


def write_table(
    folder: str | Path, pieces: list[torch.Tensor], tensor: str = DEFAULT_TENSOR
) -> TableLayout:
    """Write ``pieces`` (each ``[rows_i, row_width]``) as a table folder."""
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    width, dtype = pieces[0].shape[1], pieces[0].dtype
    for i, piece in enumerate(pieces):
        if piece.dim() != 2 or piece.shape[1] != width or piece.dtype != dtype:
            raise PleTableError(f"piece {i}: {tuple(piece.shape)} {piece.dtype} differs")
        save_file({tensor: piece.contiguous()}, str(folder / shard_name(i)))
    index = {"num_shards": len(pieces), "tensor": tensor, "row_width": width,
             "dtype": _NAMES[dtype]}  # fmt: skip
    (folder / INDEX_FILE).write_text(json.dumps(index) + "\n")
    return read_layout(folder)
