"""The bounded search plan() runs: ``decide``'s choice, found fast.

``selector.Bounded`` is the entry. Score bounds skip inference shapes and prerequisite
pairs that cannot win (``bounds.py``, ``pair_bounds.py``, ``state_search.py``); the
prompt and decoder tables (``tables.py``, ``lane_table.py``, ``lane_core.py``), the
normalizers (``normalizer_core.py``) and the probe bounds (``probe_core.py``) compute
the definition's values with numpy or partial scans; the population's rows and the
tables are reused between decisions while their inputs hold (``projection.py``,
``tables.py``). Every module here imports the rules from ``decide`` and adds speed only;
tests/helios/test_helios_fast_selector.py holds the winner and score to the definition's.
"""
