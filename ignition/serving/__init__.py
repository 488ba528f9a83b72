"""From a bundle to a running engine and its HTTP app, shared by the CLI and the replicas."""
