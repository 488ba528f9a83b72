"""Tensor parallelism over torch.distributed: ranks, sharded layers and loading, rank zero's
plan broadcast.

Rank zero runs everything a single-rank server runs (Helios, the engine, the HTTP server);
every other rank holds one shard of each layer, loads only its slices of the checkpoint and
executes the plans rank zero broadcasts, so that the collectives inside the prepared
programs pair up. Nothing here changes the single-rank path: a model is only touched when
``world_size > 1``.
"""
