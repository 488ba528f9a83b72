"""Helios's selection by definition: every shape evaluated, nothing cached for speed.

Read it from ``selector.py`` (``Exhaustive.select``: the decision top to bottom), then
the rules it calls, in the seed's split:

- ``projection.py``: the requests projected to the queue's expected end, priced
  (``service.py``: normalizers and prices);
- ``policy.py``: every inference shape's best cohort, padded shapes pruned; ``utility.py``
  holds the lane views, candidates, value per time and the ranking;
- ``rounds.py``: decoder cohorts, fixed and adaptive, and the target-row allocation;
- ``tails.py`` and ``left_out.py``: a prompt frame's score bounded by the sequence that
  finishes its tail or serves the decoders it leaves out;
- ``state_choice.py`` over ``state_candidates.py`` (pairs), ``state_rows.py`` (row values),
  ``state_tables.py`` and ``prerequisites.py``: init,
  restore, snapshot and vision shapes ranked by what they enable; ``terminal.py``:
  terminal retirement's value;
- ``refresh.py``: timing refresh and the exploration ledgers; ``learning.py``: acceptance
  probes; ``selection.py``: what a decision reads (``SelectionState``) and returns.

What these rules read (cost estimates, acceptance histories, rates, requests, the queue)
lives in ``ignition.helios.state``; decide imports it and nothing above itself.

``ignition.helios.fast`` finds the same winner without evaluating what cannot win.
"""
