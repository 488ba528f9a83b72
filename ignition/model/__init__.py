"""The hybrid model families in PyTorch, Qwen3.8-Flash-Next first (spec: qwen38-flash.md)."""

from __future__ import annotations
