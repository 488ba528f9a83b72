"""The training loop of the embedded default and the checkpoint it writes.

AdamW over the batched training forward (``ignition.model.training``) with the joint loss:
next token + MTP (token t+2) + a small MoE balance term. The seed fixes the initial weights
and the batch order; the checkpoint is written in the Hugging Face layout that
``ignition.model.weights.load_model`` reads.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer

from ignition.model.config import Qwen38Config
from ignition.model.model import HybridModel
from ignition.model.training import training_losses
from ignition.model.weights import CONFIG_FILE, WEIGHTS_FILE, checkpoint_name
from scripts.tiny.data import TokenStream, training_batches
from scripts.tiny.recipe import TinyRecipe, init_weights_
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
    config: Qwen38Config,
    stream: TokenStream,
    report: Callable[[StepLog], None] | None = None,
    report_every: int = 10,
) -> TrainResult:
    """Train a fresh model of ``config`` on ``stream`` for ``recipe.num_steps`` steps."""
    torch.manual_seed(recipe.seed)
    model = init_weights_(HybridModel(config), recipe.seed).train()
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


def save_checkpoint(model: HybridModel, tokenizer: Tokenizer, out_dir: Path) -> None:
    """config.json, model.safetensors (HF names, tied lm_head omitted) and the tokenizer."""
    out_dir.mkdir(parents=True, exist_ok=True)
    config_json = json.dumps(model.config.to_dict(), indent=2) + "\n"
    (out_dir / CONFIG_FILE).write_text(config_json)
    tensors = {
        checkpoint_name(name): param.detach().contiguous()
        for name, param in model.named_parameters()
    }
    save_file(tensors, str(out_dir / WEIGHTS_FILE), metadata={"format": "pt"})
    save_tokenizer(tokenizer, out_dir)
