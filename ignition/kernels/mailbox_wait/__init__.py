"""The in-graph PLE mailbox: publish the rows a frame needs into mapped host memory, spin on a
mapped ready flag (docs/ple.md, "Rows not known before launch")."""
