"""``serve PATH`` and the flags vLLM users type (docs: README, serving)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from ignition.cli.checks import check_range
from ignition.cli.errors import UserError
from ignition.cli.registry import Decorator


def path_argument() -> Decorator:
    """PATH, as ``vllm serve MODEL`` takes a model: a bundle or a checkpoint folder
    (``serve`` and ``debug-serve``; resolved by ``serve_artifacts``)."""
    return click.argument("path", required=False, type=click.Path(path_type=Path))


def cache_dir_option() -> Decorator:
    return click.option(
        "--cache-dir",
        envvar="IGNITION_CACHE",
        type=click.Path(file_okay=False, path_type=Path),
        help="Where checkpoints served by PATH are built (env IGNITION_CACHE; default "
        "~/.cache/ignition).",
    )


def serve_path_options() -> list[Decorator]:
    return [
        path_argument(),
        click.option(
            "--max-num-seqs",
            type=int,
            help="Request slots (sequences decoding at once). A checkpoint is built with "
            "this concurrency; a bundle serves with at most the slots it was built for.",
        ),
        click.option(
            "--chat-template",
            help="Chat template replacing the bundle's: a file, or the Jinja text itself.",
        ),
        click.option(
            "--enable-prefix-caching/--no-enable-prefix-caching",
            default=None,
            help="Retained-checkpoint prefix caching (default: on); off is --snapshot-rows 0.",
        ),
        click.option(
            "--metrics-names",
            type=click.Choice(["flare", "vllm"]),
            default="flare",
            show_default=True,
            help="vllm: also export vllm:* aliases of the flare_* metrics on /metrics.",
        ),
        cache_dir_option(),
    ]


def read_chat_template(value: str | None) -> tuple[str, str] | None:
    """--chat-template: a file, or the template itself (as vLLM reads it); (source, text),
    parsed once here so that a syntax error is a one-line error before any load."""
    if value is None:
        return None
    from jinja2 import TemplateSyntaxError

    from ignition.runtime.chat.sandbox import chat_environment

    path = Path(value).expanduser()
    if path.is_file():
        source, text = str(path), path.read_text()
        where = f"--chat-template {path}"
    elif "{{" in value or "{%" in value:
        source, text = "--chat-template", value
        where = "--chat-template (inline template)"
    else:
        raise UserError(
            f"--chat-template = {value!r}: no such file, and not an inline Jinja template "
            "(no {{ or {%)"
        )
    try:
        chat_environment().parse(text)
    except TemplateSyntaxError as err:
        raise UserError(
            f"{where}: line {err.lineno}: syntax error: {err.message}"
        ) from None
    return source, text


@dataclass(frozen=True)
class ServePathArgs:
    """PATH (a bundle or a checkpoint; None: ``--artifacts``), the request slots (None:
    the bundle's), a replacement chat template as (source, text), prefix caching on/off
    (None: default rows), the metric names and the build cache for checkpoints."""

    path: Path | None
    max_num_seqs: int | None
    chat_template: tuple[str, str] | None
    enable_prefix_caching: bool | None
    metrics_names: str
    cache_dir: Path | None

    def __post_init__(self) -> None:
        check_range("--max-num-seqs", self.max_num_seqs, 1)

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> ServePathArgs:
        """Take (pop) this group's flags out of a command's keyword arguments."""
        return cls(
            path=params.pop("path"),
            max_num_seqs=params.pop("max_num_seqs"),
            chat_template=read_chat_template(params.pop("chat_template")),
            enable_prefix_caching=params.pop("enable_prefix_caching"),
            metrics_names=params.pop("metrics_names"),
            cache_dir=params.pop("cache_dir"),
        )
