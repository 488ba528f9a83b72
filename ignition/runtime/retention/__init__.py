"""Prefix checkpoints: which prompt endpoints to capture and what that may cost, the
snapshot rows that hold them, and the cache that matches a new prompt against them."""
