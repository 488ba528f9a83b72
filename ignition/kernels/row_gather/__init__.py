"""PLE row gather: rows of a (possibly mapped host) table by id into a program's workspace."""
