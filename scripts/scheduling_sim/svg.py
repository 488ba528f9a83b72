"""A horizontal bar chart as a small SVG file (no plotting library needed)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from xml.sax.saxutils import escape

WIDTH, ROW, LEFT, PAD = 720, 22, 230, 10


def bar_chart(path: Path, title: str, values: Mapping[str, float]) -> None:
    """One bar per entry, labelled with its value; Helios's bar drawn apart."""
    finite = [v for v in values.values() if math.isfinite(v)]
    top = max(finite, default=1.0) or 1.0
    height = 40 + ROW * len(values) + PAD
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        'font-family="sans-serif" font-size="12">',
        f'<text x="{PAD}" y="20" font-weight="bold">{escape(title)}</text>',
    ]
    span = WIDTH - LEFT - 80
    for i, (name, v) in enumerate(values.items()):
        y = 32 + i * ROW
        w = 0 if not math.isfinite(v) else span * v / top
        color = "#d9480f" if name.startswith("helios") else "#1c7ed6"
        parts.append(f'<text x="{PAD}" y="{y + 14}">{escape(name)}</text>')
        parts.append(
            f'<rect x="{LEFT}" y="{y}" width="{w:.1f}" height="{ROW - 6}" fill="{color}"/>'
        )
        label = "inf" if not math.isfinite(v) else f"{v:,.3g}"
        parts.append(f'<text x="{LEFT + w + 4:.1f}" y="{y + 14}">{label}</text>')
    parts.append("</svg>")
    path.write_text("\n".join(parts) + "\n")
