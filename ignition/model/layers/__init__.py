"""One module per architectural concept of Qwen3.8 Flash."""

from __future__ import annotations
