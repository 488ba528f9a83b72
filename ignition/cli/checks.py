"""Value checks the option groups run once, when each is built from the parsed flags.
Each failure is a :class:`UserError` naming the flag and the value given."""

from __future__ import annotations

import math
from typing import Any

from ignition.cli.errors import UserError


def check_range(flag: str, value: int | None, minimum: int, maximum: int | None = None) -> None:
    """An integer flag in [minimum, maximum] (unset passes)."""
    if value is None:
        return
    if value < minimum or (maximum is not None and value > maximum):
        bound = f"{minimum}..{maximum}" if maximum is not None else f"at least {minimum}"
        raise UserError(f"{flag} = {value}: must be {bound}")


def check_finite_nonnegative(flag: str, value: float | None) -> None:
    if value is not None and not (math.isfinite(value) and value >= 0):
        raise UserError(f"{flag} = {value!r}: must be finite and nonnegative")


def check_finite_positive(flag: str, value: float | None) -> None:
    if value is not None and not (math.isfinite(value) and value > 0):
        raise UserError(f"{flag} = {value!r}: must be finite and greater than zero")


def check_probability(flag: str, value: float | None) -> None:
    """A probability mass in (0, 1] (top-p)."""
    if value is not None and not (math.isfinite(value) and 0 < value <= 1):
        raise UserError(f"{flag} = {value!r}: must be in (0, 1]")


def parse_row_count(flag: str, value: Any) -> int | None:
    """A nonnegative integer count given as text; anything else (nan, inf, 1.5, -2) is one
    line. The flag is read as text so that ``1.5`` is named as given, not as click's
    "not a valid integer"."""
    if value is None:
        return None
    try:
        count = int(str(value), 10)
    except ValueError:
        raise UserError(f"{flag} = {value}: must be a nonnegative integer") from None
    if count < 0:
        raise UserError(f"{flag} = {count}: must be a nonnegative integer")
    return count


def check_device(value: str | None) -> None:
    """Reject a device torch cannot use before any weights are read (imports torch only
    when a device is named)."""
    if value is None:
        return
    import torch

    try:
        device = torch.device(value)
    except (RuntimeError, ValueError):
        raise UserError(
            f"--device = {value!r}: not a torch device (try cpu, cuda or cuda:N)"
        ) from None
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise UserError(f"--device = {value!r}: CUDA is not available on this machine")
        if device.index is not None and device.index >= count:
            raise UserError(f"--device = {value!r}: this machine has {count} CUDA device(s)")
    elif device.type != "cpu":
        raise UserError(f"--device = {value!r}: only cpu and cuda devices are supported")


def check_port_free(host: str, port: int) -> None:
    """Bind ``host:port`` once and let go, as uvicorn will bind it after the model loads,
    so that a port in use is one line before any build or load rather than an exit after
    them. (A race with another process remains possible; this is the common case.)"""
    import errno
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            sock.bind((host, port))
        except OSError as err:
            if err.errno == errno.EADDRINUSE:
                raise UserError(
                    f"--port = {port}: {host}:{port} is already in use; stop what listens "
                    "there or choose another --port"
                ) from None
            raise UserError(f"--host = {host!r}: cannot listen there ({err.strerror})") from None
