"""One module per architectural concept of the hybrid families (Qwen3.8-Flash-Next's included)."""

from __future__ import annotations
