"""The model card (README.md) of the embedded default, rendered from measured numbers."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from scripts.tiny.evaluate import Acceptance, ServingSpeed, Validation
from scripts.tiny.recipe import TinyRecipe

TRAIN_COMMAND = "python scripts/train_tiny.py --out ignition/assets/qwen38-tiny"
EVALUATE_COMMAND = "python scripts/train_tiny.py --evaluate ignition/assets/qwen38-tiny"
# The training facts ride in the card as a comment, so a re-evaluation can re-render it.
FACTS_MARKER = "training-facts:"
PROMPT_LEN = 64  # tokens of each held-out prompt of the acceptance measurement


@dataclass(frozen=True)
class EarlierDefault:
    """A default an earlier run shipped, measured the same way (the card compares)."""

    label: str
    num_tokens: int
    perplexity: float
    at_least: tuple[float, ...]
    tokens_per_round: float


# The defaults this one follows: the pre-release invented format (family qwen38, two static
# streams, a per-layer token table, dense attention; 4.27 M parameters, 700 steps of 16 x 256
# tokens, 21.2 minutes on 2 threads), then the first run in the released layout (this
# architecture, 320 steps of 8 x 256 tokens, 21.0 minutes on 1 thread). Same corpus,
# tokenizer procedure (less the six tag tokens for the first) and measurements.
EARLIER = (
    EarlierDefault("pre-release format", 2_867_200, 35.10, (0.750, 0.547, 0.414), 2.71),
    EarlierDefault("released layout, 320 steps", 655_360, 95.10, (0.648, 0.488, 0.387), 2.52),
)


@dataclass(frozen=True)
class Evaluation:
    validation: Validation
    acceptance: Acceptance
    speed: ServingSpeed
    sample_prompt: str
    sample_text: str

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)


@dataclass(frozen=True)
class TrainingFacts:
    corpus_root: str
    corpus_sha256: str
    python_version: str
    train_files: tuple[str, ...]
    held_out_files: tuple[str, ...]
    num_train_tokens: int
    num_parameters: int
    checkpoint_bytes: int
    train_seconds: float
    num_threads: int
    num_steps: int
    num_tokens_seen: int
    final_train_loss: float
    final_mtp_loss: float
    recipe: dict


def render(facts: TrainingFacts, evaluation: Evaluation, config: dict) -> str:
    v, a, s = evaluation.validation, evaluation.acceptance, evaluation.speed
    per_position = "\n".join(
        f"| {k + 1} | {a.at_least[k]:.3f} | {a.conditional[k]:.3f} |" for k in range(a.draft_depth)
    )
    architecture = _architecture_rows(config)
    recipe = json.dumps(facts.recipe, indent=2, default=list)
    seq_len = facts.recipe["seq_len"]
    prompt_len = PROMPT_LEN
    threads = facts.recipe.get("num_threads")
    is_default = threads == TinyRecipe().num_threads
    train_command = TRAIN_COMMAND if is_default else f"{TRAIN_COMMAND} --threads {threads}"
    return f"""# qwen38-tiny: the embedded default checkpoint

A {facts.num_parameters / 1e6:.2f} M-parameter Qwen3.8-Flash-Next (`qwen4_exp`;
`ignition/model/families/qwen4_exp.py`) that ships with Ignition so that every command works
on a fresh machine with no download, and so that speculative decoding meets real MTP acceptance rather
than the noise of random weights. It writes Python that looks like the standard library; it
knows nothing else. Weights are fp32 ({facts.checkpoint_bytes / 1e6:.1f} MB in
`model.safetensors`), in the released layout (`config.json` with `model_type`
`qwen4_exp_text` as transformers writes it; tensors `model.language_model.*` with the PLE table
in `shard_N` pieces, `lm_head`, and the MTP head under `mtp.*` as vLLM loads it), read by
`ignition.model.weights.load_model` and by transformers' `Qwen4ExpForCausalLM`.
transformers' logits equal ours (serving path and training forward) within 5e-6 on held-out
text, except at the few queries where QSA's top-k meets exactly tied block scores: the
implementations then keep different blocks (differences up to about 0.04 in a logit, the
same argmax on the prompts checked).

## Architecture

{architecture}

## Corpus

The top-level pure-Python modules of CPython's standard library (`Lib/*.py` without
`test*`), read from the interpreter that runs the script ({facts.python_version},
`{facts.corpus_root}`): they are on every machine that runs Ignition, need no download, are
PSF-licensed, and generated text is easy to recognise as Python. Every twentieth file by
sorted name is held out ({len(facts.held_out_files)} files: {", ".join(facts.held_out_files)});
the remaining {len(facts.train_files)} files are {facts.num_train_tokens:,} training tokens.
Corpus SHA-256 (file names and bytes, sorted): `{facts.corpus_sha256}`. Another CPython
patch release gives another hash, and numbers that differ within noise.

The tokenizer (`tokenizer.json`, 4096 byte-level BPE tokens trained with `tokenizers` on the
training files) reserves `<|endoftext|>`, `<|im_start|>`, `<|im_end|>`, `<|pad|>` and
`<|image|>` as special ids 0-4, and `<think>`, `</think>`, `<tool_call>`, `</tool_call>`,
`<tool_response>`, `</tool_response>` as ordinary single tokens 5-10. The chat template in
`tokenizer_config.json` follows the Qwen3.5 conventions: tools listed in the system turn,
calls as `<tool_call>` with `<function=...>` and `<parameter=...>` (the server detects the
`qwen3_coder` parser from it),
tool responses grouped into a user turn, and the reply opened inside `<think>` unless a
request sets `enable_thinking` to false. The model never saw any of this in training: the
template is there so that every serving feature can be shown, not so that it is used well.

## Training

{facts.num_steps} AdamW steps of {facts.recipe["batch_size"]} x {facts.recipe["seq_len"]} tokens
({facts.num_tokens_seen:,} tokens) with seed {facts.recipe["seed"]} in
**{facts.train_seconds / 60:.1f} minutes** on {facts.num_threads} CPU thread(s) (wall time of the
training loop on the machine that wrote this card; `--threads` changes the time, not the seed
or the batch order). Final training loss {facts.final_train_loss:.3f} (next token), MTP
{facts.final_mtp_loss:.3f}.

```json
{recipe}
```

Reproduce (tokenizer, training, checkpoint, this card): `{train_command}`

## Evaluation (held-out files)

Every number below is printed again by `{EVALUATE_COMMAND}`.

| metric | value |
|---|---|
| validation loss (nats/token, {v.num_tokens:,} tokens, {seq_len}-token windows) | {v.lm_loss:.3f} |
| validation perplexity | {v.perplexity:.2f} |
| MTP validation loss (token t+2) | {v.mtp_loss:.3f} |
| MTP argmax == target argmax at t+1 (teacher forced) | {v.mtp_top1_vs_target:.3f} |

MTP acceptance under greedy decoding, measured through the serving path: {a.num_prompts}
held-out prompts (two {prompt_len}-token slices per held-out file, at evenly spaced offsets)
are prefilled with `run_step`, then each runs {a.num_rounds // max(1, a.num_prompts)} rounds of
`ignition.model.speculative.speculative_round` ({a.num_rounds} lane-rounds in all) with
depth {a.draft_depth}, every draft verified, greedy acceptance. Chance level is
1/{config["vocab_size"]}. A model this small often falls into repetition under greedy decoding,
and repetition is easy to draft; the teacher-forced agreement above is the same question asked
on the natural held-out text.

| draft position | P(first k accepted) | P(k accepted given 1..k-1) |
|---|---|---|
{per_position}

Mean tokens per round (accepted drafts + 1): {a.tokens_per_round:.2f}.

Beside the defaults that came before it (the pre-release invented `qwen38` format, 4.27 M
parameters; then this architecture after 320 steps), on the same corpus with the same tokenizer
procedure, measured the same way:

{_earlier_table(v.perplexity, a, facts.num_tokens_seen)}

Reference-kernel serving on CPU (measured by the same command, on the training machine, one
run): a batch-4 decode step with 256-token contexts takes {s.decode_step_ms_batch4:.1f} ms, one
4096-token prefill chunk {s.prefill_4096_ms:.0f} ms.

## Greedy sample

Prompt:

```python
{evaluation.sample_prompt}
```

Greedy continuation (plain decoding, 120 tokens):

```python
{evaluation.sample_text}
```

<!-- {FACTS_MARKER} {json.dumps(asdict(facts))} -->
"""


def _earlier_table(perplexity: float, a: Acceptance, tokens_seen: int) -> str:
    """This checkpoint's column beside each of ``EARLIER``'s."""
    cols = [("this checkpoint", tokens_seen, perplexity, a.at_least, a.tokens_per_round)]
    cols += [(e.label, e.num_tokens, e.perplexity, e.at_least, e.tokens_per_round) for e in EARLIER]
    rows = [
        "| | " + " | ".join(c[0] for c in cols) + " |",
        "|---|" + "---|" * len(cols),
        "| training tokens | " + " | ".join(f"{c[1]:,}" for c in cols) + " |",
        "| validation perplexity | " + " | ".join(f"{c[2]:.2f}" for c in cols) + " |",
    ]
    for k in range(min(a.draft_depth, *(len(e.at_least) for e in EARLIER))):
        cells = " | ".join(f"{c[3][k]:.3f}" for c in cols)
        rows.append(f"| P(first {k + 1} accepted) | {cells} |")
    rows.append("| mean tokens per round | " + " | ".join(f"{c[4]:.2f}" for c in cols) + " |")
    return "\n".join(rows)


def _architecture_rows(c: dict) -> str:
    """The config.json keys (``Qwen4ExpTextConfig``) as the table of the card."""
    kinds = {"linear_attention": "GDN", "indexed_attention": "QSA"}
    rope = c.get("rope_parameters") or {}
    rotary = int(c["head_dim"] * rope.get("partial_rotary_factor", 1.0))
    ple_ids = ", ".join(str(i) for i in c["ple_layer_ids"])
    rows = [
        ("layers", f"{c['num_hidden_layers']}: {', '.join(kinds[k] for k in c['layer_types'])}"),
        (
            "hidden",
            f"{c['hidden_size']}, {c['hc_count']} gated hyper-connection streams "
            f"(low rank {c['hc_lowrank']})",
        ),
        (
            "QSA",
            f"{c['num_attention_heads']} query / {c['num_key_value_heads']} KV heads of "
            f"{c['head_dim']}, rotary {rotary}; indexer {c['indexer_n_heads']} heads of "
            f"{c['indexer_head_dim']}, budget {c['indexer_budget']} tokens in blocks of "
            f"{c['indexer_compress_ratio']}",
        ),
        (
            "GDN",
            f"{c['linear_num_value_heads']} value / {c['linear_num_key_heads']} key heads, key "
            f"{c['linear_key_head_dim']}, value {c['linear_value_head_dim']}, conv "
            f"{c['linear_conv_kernel_dim']}, {c['output_gate_type']} output gate",
        ),
        (
            "MoE",
            f"{c['num_experts']} experts top-{c['num_experts_per_tok']} (width "
            f"{c['moe_intermediate_size']}) + gated shared expert "
            f"({c['shared_expert_intermediate_size']})",
        ),
        (
            "PLE",
            f"layer {ple_ids} (one-indexed): {c['ngram_size']}-gram hash, "
            f"{c['heads_per_ngram']} heads per n-gram, table base {c['ngram_vocab_size_base']} "
            f"rows per head, embed {c['ple_embed_dim']}, conv {c['ple_conv_kernel_size']}, "
            f"{c['split_ngram_parts']} shards",
        ),
        ("MTP", "1 layer (`mtp.*`), trained jointly (loss on token t+2)"),
        (
            "vocab",
            f"{c['vocab_size']} byte-level BPE, "
            f"{'tied' if c.get('tie_word_embeddings') else 'untied'} embeddings, "
            f"{c['max_position_embeddings']} positions",
        ),
    ]
    return "\n".join(["| | |", "|---|---|", *(f"| {k} | {v} |" for k, v in rows)])


def write_card(out_dir: Path, facts: TrainingFacts, evaluation: Evaluation, config: dict) -> None:
    (out_dir / "README.md").write_text(render(facts, evaluation, config))


def read_facts(out_dir: Path) -> TrainingFacts:
    """The training facts a previous ``write_card`` left in ``out_dir``/README.md."""
    card = (out_dir / "README.md").read_text()
    start = card.rfind(f"<!-- {FACTS_MARKER}")
    if start < 0:
        raise ValueError(f"{out_dir / 'README.md'}: no {FACTS_MARKER!r} comment to re-render from")
    body = card[start + len(f"<!-- {FACTS_MARKER}") : card.index("-->", start)]
    raw = json.loads(body)
    raw["train_files"] = tuple(raw["train_files"])
    raw["held_out_files"] = tuple(raw["held_out_files"])
    return TrainingFacts(**raw)
