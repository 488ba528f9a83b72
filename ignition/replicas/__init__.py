"""Data-parallel replicas on Ray Serve (``ignition serve --data-parallel-size N``).

Each replica is a whole Ignition server (its own bundle, engine and Helios) inside a Ray
Serve deployment; one router deployment in front keeps a conversation on the replica
holding its retained checkpoints and sends other work where Helios reports room. Ray
places, restarts and drains replicas: there is no cluster manager here (docs/scaling.md).
Only ``launch.py``, ``replica.py`` and ``router.py`` import Ray; the routing policy is pure.
"""
