"""What the executors share: the state, the prepared programs and the per-request ledger."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from ignition.compiler.graph import PreparedProgram
from ignition.compiler.ple_staging import PleStaging
from ignition.compiler.programs import Program
from ignition.compiler.state_ops import StateOperations
from ignition.helios import Fence
from ignition.model.prompt_logprobs import PromptScores
from ignition.model.state import ModelState
from ignition.runtime.executors.ledger import RequestLedger
from ignition.runtime.executors.resources import SlotResources
from ignition.runtime.ple.delivery import FrameDelivery
from ignition.runtime.proposals.registry import Proposals
from ignition.runtime.vision.binding import ImageEncoder

# (final-normed hidden [N, H], target ids [N], alternatives) -> device scores
PromptScorer = Callable[[torch.Tensor, torch.Tensor, int], PromptScores]


@dataclass
class ExecutorContext:
    state: ModelState
    programs: dict[str, tuple[Program, PreparedProgram]]
    resources: SlotResources
    eos_token_ids: frozenset[int]
    # Snapshot/restore programs: the prerequisites and terminal work Helios schedules.
    state_ops: StateOperations | None = None
    # The vision tower (prepared vision programs) for requests with images, and the
    # prepared feature storage of each slot's active vision window [slots, C, hidden].
    encode_images: ImageEncoder | None = None
    feature_storage: torch.Tensor | None = None
    # The prompt-logprobs stage (None: this worker cannot serve prompt logprobs).
    score_prompt: PromptScorer | None = None
    ledger: RequestLedger = field(default_factory=RequestLedger)
    # The PLE n-gram rows' delivery (None: no table, or one the program gathers itself).
    ple: FrameDelivery | None = None
    ple_staging: PleStaging | None = None  # CUDA only (compiler.ple_staging)
    # Called with the fence once a program frame is staged, just before it runs: tensor
    # parallel ranks agree there that every rank staged it (ignition.distributed.ranks).
    before_run: Callable[[Fence], None] | None = None
    # The proposal sources whose drafts rows bind (prompt lookup under the server's
    # --prompt-lookup-max/-min).
    proposals: Proposals = field(default_factory=Proposals)

    def sampling_history(self):
        """The programs' shared device sampling history (model.logits_processing), if any."""
        return next((p.history for p, _ in self.programs.values() if p.history), None)

    def sync_page_table(self) -> None:
        mirror = self.resources.page_table
        if mirror is not None:
            mirror.sync()
