"""The training loop of the embedded default and the checkpoint it writes.

AdamW over the batched training forward (``ignition.model.training``) with the joint loss:
next token + MTP (token t+2) + a small MoE balance term. The seed fixes the initial weights
and the batch order; the checkpoint is written in the released Qwen3.8-Flash-Next layout
(``scripts.tiny.released_layout``) that ``ignition.model.weights.load_model`` and
transformers' ``Qwen4ExpForCausalLM`` read.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from tokenizers import Tokenizer

from ignition.model.model import HybridModel
from ignition.model.training import training_losses
from scripts.tiny.data import TokenStream, training_batches
from scripts.tiny.recipe import TinyRecipe, init_weights_
from scripts.tiny.released_layout import ReleasedTemplate, save_released
from scripts.tiny.tokenizer import save_tokenizer


@dataclass(frozen=True)
class StepLog:
    step: int
    learning_rate: float
    loss: float
    lm_loss: float
    mtp_loss: float
    balance: float
    elapsed_s: float


@dataclass
class TrainResult:
    model: HybridModel
    train_seconds: float
    num_tokens: int
    log: list[StepLog] = field(default_factory=list)


def _optimizer(model: HybridModel, recipe: TinyRecipe) -> torch.optim.Optimizer:
    """Decay matrices only; vectors (norms, decays, hyper-connection weights) stay free."""
    params = [p for p in model.parameters() if p.requires_grad]
    matrices = [p for p in params if p.dim() >= 2]
    vectors = [p for p in params if p.dim() < 2]
    groups = [
        {"params": matrices, "weight_decay": recipe.weight_decay},
        {"params": vectors, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=recipe.learning_rate, betas=(0.9, 0.95), eps=1e-8)


def train(
    recipe: TinyRecipe,
    template: ReleasedTemplate,
    stream: TokenStream,
    report: Callable[[StepLog], None] | None = None,
    report_every: int = 10,
) -> TrainResult:
    """Train a fresh model of ``template``'s config on ``stream`` for ``recipe.num_steps``."""
    torch.manual_seed(recipe.seed)
    model = init_weights_(template.empty_model(), recipe.seed).train()
    optimizer = _optimizer(model, recipe)
    batches = training_batches(
        stream, recipe.batch_size, recipe.seq_len, recipe.num_steps, recipe.seed
    )
    log: list[StepLog] = []
    start = time.perf_counter()
    for step, batch in enumerate(batches):
        learning_rate = recipe.learning_rate_at(step)
        for group in optimizer.param_groups:
            group["lr"] = learning_rate
        losses = training_losses(model, batch, recipe.mtp_weight, recipe.balance_weight)
        optimizer.zero_grad(set_to_none=True)
        losses.total.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), recipe.grad_clip)
        optimizer.step()
        if step % report_every == 0 or step == recipe.num_steps - 1:
            entry = StepLog(
                step=step,
                learning_rate=learning_rate,
                loss=float(losses.total.detach()),
                lm_loss=float(losses.lm.detach()),
                mtp_loss=float(losses.mtp.detach()),
                balance=float(losses.balance.detach()),
                elapsed_s=time.perf_counter() - start,
            )
            log.append(entry)
            if report is not None:
                report(entry)
    elapsed = time.perf_counter() - start
    num_tokens = recipe.num_steps * recipe.batch_size * recipe.seq_len
    return TrainResult(model.eval(), elapsed, num_tokens, log)


def save_checkpoint(
    model: HybridModel, template: ReleasedTemplate, tokenizer: Tokenizer, out_dir: Path
) -> None:
    """config.json and model.safetensors in the released layout, and the tokenizer."""
    save_released(model, template, out_dir)
    save_tokenizer(tokenizer, out_dir)
