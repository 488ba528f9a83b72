"""What Helios has learned and holds between decisions: duration estimates (``cost.py``),
acceptance histories and forecasts (``acceptance.py``), service rates and their
normalizers (``rates.py``, ``prompt_starts.py``), each request's state (``requests.py``),
the execution queue (``queue.py``) and the accounting that updates them on completion
(``accounting.py``)."""
