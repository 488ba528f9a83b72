"""OpenAI-compatible HTTP serving (FastAPI): endpoints, SSE, Prometheus metrics."""
