"""Data-parallel replicas on Ray Serve (``ignition serve --data-parallel-size N``), each a
whole server behind one router (docs/scaling.md); the routing policy imports no Ray."""
