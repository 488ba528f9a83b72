"""From a bundle to a running engine and its HTTP app: the glue ``generate``, ``serve``,
``debug-serve`` and the replicas share, above the runtime, server and distributed rooms
it ties together, so that the CLI stays a thin argument parser."""
