"""The hybrid model families in PyTorch, Qwen3.8-Flash-Next first (spec: qwen38-flash.md).

``config`` holds every dimension, ``families/`` read each published config.json,
``layers/`` holds one module per paper concept, ``state`` the per-slot caches, ``packing``
the static-capacity packed inputs, ``model`` the packed mixed forward,
``step``/``speculative`` the complete programs built on it, ``sampling`` and ``weights`` the
edges.
"""

from __future__ import annotations
