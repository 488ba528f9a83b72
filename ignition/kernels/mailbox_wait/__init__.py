"""The in-graph PLE mailbox (docs/ple.md, "Rows not known before launch")."""
