"""``ignition generate``: one prompt offline, through the same runtime the server uses."""

from __future__ import annotations

import json
from typing import Any

import click

from ignition.cli.checks import check_finite_nonnegative, check_probability, check_range
from ignition.cli.errors import UserError
from ignition.cli.progress import LoadProgress
from ignition.cli.registry import Command
from ignition.cli.runtime_options import RuntimeArgs, runtime_options
from ignition.cli.serve_artifacts import existing_bundle
from ignition.cli.serve_common import serve_options, with_ranks


def run(
    prompt: str,
    max_tokens: int,
    temperature: float,
    top_p: float,
    top_k: int,
    seed: int | None,
    as_json: bool,
    **params: Any,
) -> None:
    """Generate offline through the same runtime the server uses."""
    from ignition.runtime.requests.errors import RequestError
    from ignition.serving.generate import generate_once

    runtime = RuntimeArgs.from_params(params)
    check_range("--max-tokens", max_tokens, 1)
    check_finite_nonnegative("--temperature", temperature)
    check_probability("--top-p", top_p)
    check_range("--top-k", top_k, 0)
    existing_bundle(runtime.artifacts)
    # --json output is for programs: nothing but the JSON, on stdout or stderr.
    with LoadProgress(quiet=as_json) as progress:

        def rank_zero(options: Any, tp: Any) -> dict[str, Any]:
            return generate_once(
                options,
                prompt,
                max_tokens=max_tokens,
                temperature=temperature,
                top_p=top_p,
                top_k=top_k,
                seed=seed,
                listener=progress.listener,
                tp=tp,
            )

        try:
            result = with_ranks(runtime.placement, serve_options(runtime), rank_zero)
        except RequestError as err:
            raise UserError(str(err)) from None
    if result is None:  # a non-zero torchrun rank: rank zero prints
        return
    click.echo(json.dumps(result, indent=2) if as_json else result["text"])


COMMAND = Command(
    name="generate",
    options=(
        *runtime_options(),
        click.option("--prompt", required=True, help="Prompt text."),
        click.option(
            "--max-tokens",
            type=int,
            default=64,
            show_default=True,
            help="Output tokens to generate at most.",
        ),
        click.option(
            "--temperature", type=float, default=0.0, show_default=True, help="0: greedy decoding."
        ),
        click.option(
            "--top-p", type=float, default=1.0, show_default=True, help="Nucleus mass, (0, 1]."
        ),
        click.option("--top-k", type=int, default=0, show_default=True, help="0: no top-k limit."),
        click.option("--seed", type=int, help="Sampling seed (default: derived from the request)."),
        click.option(
            "--json", "as_json", is_flag=True, help="Token ids, text and per-step timing."
        ),
    ),
    run=run,
)
