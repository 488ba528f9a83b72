"""Tensor parallelism: rank zero runs the server, the others hold shards and execute its plans
(docs/scaling.md); the single-rank path is untouched."""
