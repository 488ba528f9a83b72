"""The bundled runtime: bundle loading, resources, the worker and the engine loop."""
