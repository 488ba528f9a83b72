"""Trace export: frames, waits, deliveries and counters as Perfetto JSON, and /dashboard."""
