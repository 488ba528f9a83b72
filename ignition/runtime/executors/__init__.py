"""Executors registered by graph kind: the worker routes each plan to its kind's executor."""
