"""The vision tower and what feeds it (only ``encoder`` needs torch)."""
