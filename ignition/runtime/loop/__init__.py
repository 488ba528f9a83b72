"""The engine loop: one thread plans with Helios, launches and waits on the worker, and
publishes; admission, publication, lifecycle, failures and the hooks at its named points."""
