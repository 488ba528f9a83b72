"""Train, evaluate and write the embedded default checkpoint (ignition/assets/qwen38-tiny).

    python scripts/train_tiny.py --out ignition/assets/qwen38-tiny     # train + card (~1 h)
    python scripts/train_tiny.py --evaluate ignition/assets/qwen38-tiny  # re-measure, print JSON

Training uses only what ships with Python (see scripts/tiny/corpus.py), a fixed seed and a
deterministic batch order; the card's numbers come from the same functions ``--evaluate``
runs on the saved checkpoint.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # run as a file: make `scripts.tiny` and `ignition` importable
    sys.path.insert(0, str(REPO_ROOT))

import torch  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

from ignition.kernels import use_backend  # noqa: E402
from ignition.model.weights import CONFIG_FILE, WEIGHTS_FILE, load_model  # noqa: E402
from scripts.tiny.card import (  # noqa: E402
    PROMPT_LEN,
    Evaluation,
    TrainingFacts,
    read_facts,
    write_card,
)
from scripts.tiny.corpus import Corpus, stdlib_corpus  # noqa: E402
from scripts.tiny.data import TokenStream, encode_files  # noqa: E402
from scripts.tiny.evaluate import (  # noqa: E402
    greedy_generate,
    held_out_prompts,
    measure_acceptance,
    serving_speed,
    validate,
)
from scripts.tiny.recipe import TinyRecipe  # noqa: E402
from scripts.tiny.released_layout import ReleasedTemplate  # noqa: E402
from scripts.tiny.tokenizer import special_token_ids, train_tokenizer  # noqa: E402
from scripts.tiny.trainer import StepLog, save_checkpoint, train  # noqa: E402

VOCAB_SIZE = 4096
SEQ_LEN = 256
PROMPTS_PER_FILE = 2
NUM_ROUNDS = 16
DRAFT_DEPTH = 3
SAMPLE_TOKENS = 120
# Prompts end before the newline: byte-level BPE merges a newline with the indentation after it,
# so a prompt ending in a bare newline promises an unindented line.
SAMPLE_PROMPT = 'class Stack:\n    """A last-in, first-out stack."""\n\n    def __init__(self):'


def evaluate(path: Path, corpus: Corpus) -> Evaluation:
    model = load_model(path)
    tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
    with torch.no_grad(), use_backend("reference"):
        validation = validate(model, TokenStream.encode(tokenizer, corpus.held_out_files), SEQ_LEN)
        prompts = held_out_prompts(
            encode_files(tokenizer, corpus.held_out_files), PROMPT_LEN, PROMPTS_PER_FILE
        )
        acceptance = measure_acceptance(model, prompts, NUM_ROUNDS, DRAFT_DEPTH)
        sample = greedy_generate(model, tokenizer.encode(SAMPLE_PROMPT).ids, SAMPLE_TOKENS)
        speed = serving_speed(model)
    return Evaluation(validation, acceptance, speed, SAMPLE_PROMPT, tokenizer.decode(sample))


def _print_step(entry: StepLog) -> None:
    print(
        f"step {entry.step:5d}  lr {entry.learning_rate:.2e}  loss {entry.loss:.4f}  "
        f"lm {entry.lm_loss:.4f}  mtp {entry.mtp_loss:.4f}  balance {entry.balance:.3f}  "
        f"{entry.elapsed_s:7.1f}s",
        flush=True,
    )


def train_and_write(out_dir: Path, recipe: TinyRecipe) -> None:
    corpus = stdlib_corpus()
    tokenizer = train_tokenizer(corpus.train_text, VOCAB_SIZE)
    stream = TokenStream.encode(tokenizer, corpus.train_files)
    template = ReleasedTemplate.build(recipe.text_config(special_token_ids(tokenizer)))
    print(f"corpus {corpus.sha256()}: {len(stream):,} training tokens", flush=True)
    result = train(recipe, template, stream, report=_print_step)
    # the trained weights first in torch's own format: a failed export loses no training
    backup = Path(tempfile.gettempdir()) / f"train_tiny_{os.getpid()}.pt"
    torch.save(result.model.state_dict(), backup)
    print(f"trained weights saved to {backup}", flush=True)
    save_checkpoint(result.model, template, tokenizer, out_dir)
    last = result.log[-1]
    facts = TrainingFacts(
        corpus_root=str(corpus.root),
        corpus_sha256=corpus.sha256(),
        python_version=platform.python_version(),
        train_files=tuple(p.name for p in corpus.train_files),
        held_out_files=tuple(p.name for p in corpus.held_out_files),
        num_train_tokens=len(stream),
        num_parameters=sum(p.numel() for p in result.model.parameters()),
        checkpoint_bytes=(out_dir / WEIGHTS_FILE).stat().st_size,
        train_seconds=result.train_seconds,
        num_threads=torch.get_num_threads(),
        num_steps=recipe.num_steps,
        num_tokens_seen=result.num_tokens,
        final_train_loss=last.lm_loss,
        final_mtp_loss=last.mtp_loss,
        recipe=dataclasses.asdict(recipe),
    )
    backup.with_suffix(".facts.json").write_text(json.dumps(dataclasses.asdict(facts)))
    print(f"trained in {result.train_seconds:.0f}s; evaluating", flush=True)
    evaluation = evaluate(out_dir, corpus)
    print(evaluation.to_json(), flush=True)
    write_card(out_dir, facts, evaluation, template.config_json())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--out", type=Path, help="train and write the checkpoint here")
    action.add_argument("--evaluate", type=Path, help="measure an existing checkpoint")
    parser.add_argument(
        "--update-card",
        action="store_true",
        help="with --evaluate: re-render README.md from the new measurements",
    )
    parser.add_argument("--steps", type=int, help="override the recipe's number of steps")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: recipe's)")
    args = parser.parse_args(argv)
    recipe = TinyRecipe().with_overrides(num_steps=args.steps, num_threads=args.threads)
    torch.set_num_threads(min(recipe.num_threads, os.cpu_count() or 1))
    if args.out is not None:
        train_and_write(args.out, recipe)
    else:
        evaluation = evaluate(args.evaluate, stdlib_corpus())
        print(evaluation.to_json())
        if args.update_card:
            config = json.loads((args.evaluate / CONFIG_FILE).read_text())
            write_card(args.evaluate, read_facts(args.evaluate), evaluation, config)


if __name__ == "__main__":
    main()
