"""Helios's selection by definition: every shape evaluated, nothing cached for speed.

Read it from ``selector.py`` (``Exhaustive.select``: the decision top to bottom), then
the rules it calls, in the seed's split:

- ``projection.py``: the requests projected to the queue's expected end, priced
  (``service.py``: service rates, normalizers, prices; ``prompt_starts.py``: a newcomer's
  start bounded by its prompt);
- ``policy.py``: every inference shape's best cohort, padded shapes pruned; ``utility.py``
  holds the lane views, candidates, value per time and the ranking;
- ``rounds.py``: decoder cohorts, fixed and adaptive, and the target-row allocation;
  ``speculation.py``: acceptance histories and expected output;
- ``tails.py`` and ``left_out.py``: a prompt frame's score bounded by the sequence that
  finishes its tail or serves the decoders it leaves out;
- ``state_choice.py`` over ``state_candidates.py`` and ``prerequisites.py``: init,
  restore, snapshot and vision shapes ranked by what they enable; ``terminal.py``:
  terminal retirement's value;
- ``cost.py``: timing estimates and freshness; ``refresh.py``: timing refresh and the
  exploration ledgers; ``learning.py``: acceptance probes.

``ignition.helios.fast`` finds the same winner without evaluating what cannot win.
"""
