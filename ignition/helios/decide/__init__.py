"""Helios's selection by definition: every shape evaluated, nothing cached for speed."""
