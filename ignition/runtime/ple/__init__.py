"""The PLE n-gram table's residency and delivery (docs/ple.md)."""
