"""Executors registered by graph kind: the worker routes each plan to its kind's executor.

- ``program``: prefill, decode, speculative and mixed frames (binding, PLE rows, prompt
  scoring at launch; result decoding at the wait);
- ``state_copy``: initialization, restore and snapshot copies (compiler.state_ops);
- ``vision``: encoding a request's active window of images.

They share one :class:`ExecutorContext` (state, programs, slot resources and the
per-request :class:`RequestLedger`), so a restore's prompt cursor is where the program
executor continues, and a vision frame's encoded images are what it binds.
"""
