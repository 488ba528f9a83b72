"""The hybrid decoder every family shares: the packed mixed forward over prompt and decode rows.

forward, :meth:`HybridModel.commit` and :meth:`absorb_draft_context` are separate so a round
can reject drafts without touching state.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch
from torch import Tensor, nn

from ignition.model.config import ModelConfig
from ignition.model.index_rings import keep_draft_ring, keep_index_ring, keep_mtp_ring
from ignition.model.layers.decoder import DecoderLayer, PleInputs
from ignition.model.layers.gated_hyper import GatedHyperConnection
from ignition.model.layers.ngram_hash import next_context
from ignition.model.layers.ngram_ple import RowLookup
from ignition.model.layers.norm import RMSNorm
from ignition.model.layers.qsa import DraftSelections
from ignition.model.mtp import MtpHead
from ignition.model.mtp_gated import GatedMtpHead
from ignition.model.packing import (
    PackedCapacity,
    PackedInputs,
    PackedMeta,
    gather_rows,
    kept_candidates,
    multimodal_rope,
)
from ignition.model.state import ModelState
from ignition.model.target_output import TargetOutput
from ignition.model.vision.encoder import VisionEncoder


class HybridModel(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        # Per PLE layer: where a forward without ``ple_rows`` takes its rows during a program.
        self.ple_lookups: list[RowLookup] | None = None
        self.layers = nn.ModuleList(
            DecoderLayer(config, i) for i in range(config.num_hidden_layers)
        )
        # Hyper-connections end in a mixer whose group norm is the final norm.
        gated = config.gated_hyper
        self.norm = (
            RMSNorm(config.hidden_size, config.rms_norm_eps, config.norm_offset)
            if gated is None
            else None
        )
        self.hc_mixer = (
            GatedHyperConnection(
                config.hc_streams, config.hidden_size, gated.lowrank, config.rms_norm_eps, False
            )
            if gated is not None
            else None
        )
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.tie_weights()
        self.mtp: MtpHead | GatedMtpHead | None = None
        if config.mtp_num_layers:
            self.mtp = GatedMtpHead(config) if gated is not None else MtpHead(config)
        self.visual = VisionEncoder(config.vision, config.hidden_size) if config.vision else None

    def tie_weights(self) -> None:
        """Share the embedding with lm_head when tied (again after ``to_empty``, which unties)."""
        if self.config.tie_word_embeddings:
            self.lm_head.weight = self.embed_tokens.weight

    def embed(self, inputs: PackedInputs, meta: PackedMeta) -> Tensor:
        """Token embeddings with image features at their lane-major prompt offsets."""
        embeds = self.embed_tokens(inputs.token_ids)  # [T, hidden]
        num_tokens = embeds.shape[0]
        image_pos = inputs.image_positions.long()
        if image_pos.numel() == 0:
            return embeds
        lane_capacity = max(meta.capacity.lane_capacity, 1)
        lane = (image_pos.clamp(min=0) // lane_capacity).clamp(max=meta.prompt_lanes - 1)
        offset = image_pos - lane * lane_capacity
        is_used = (image_pos >= 0) & (offset < meta.prompt_len.long()[lane]) & meta.has_prompt[lane]
        packed = meta.cu_query_lens[meta.prompt_row[lane]].long() + offset
        index = torch.where(is_used, packed, num_tokens)
        padded = torch.cat([embeds, embeds.new_zeros(1, embeds.shape[1])])
        padded[index] = inputs.image_features.to(embeds.dtype)
        return padded[:num_tokens]

    def forward_packed(
        self,
        inputs: PackedInputs,
        capacity: PackedCapacity,
        state: ModelState,
        ple_rows: list[Tensor | None] | None = None,
    ) -> TargetOutput:
        """One packed frame; ``ple_rows`` per PLE layer [T, heads, head_dim], None: own table."""
        meta = PackedMeta.build(
            capacity, inputs.query_lens, inputs.slot_ids, inputs.prefill_row, state
        )
        meta.rope_positions = multimodal_rope(meta, inputs)
        x = self.embed(inputs, meta)
        ple_inputs, ngram_next = self._ple_inputs(inputs, meta, state, ple_rows)
        num_streams = max(self.config.hc_streams, 1)
        streams = x[:, None, :].expand(-1, num_streams, -1).contiguous()
        gdn_updates, ple_updates, index_raw = [], [], []
        for layer in self.layers:
            streams, update = layer(streams, meta, state, ple_inputs)
            if update.gdn is not None:
                gdn_updates.append(update.gdn)
            if update.ple is not None:
                ple_updates.append(update.ple)
            if update.index_raw is not None:
                index_raw.append(update.index_raw)
        if self.hc_mixer is not None:
            hidden = self.hc_mixer.read(streams)[0]
        else:
            assert self.norm is not None
            hidden = self.norm(streams.sum(1))
        rope = meta.rope_positions
        rope = meta.positions[None].expand(3, -1) if rope is None else rope
        return TargetOutput(
            meta,
            state,
            hidden,
            gdn_updates,
            self.project,
            ple_updates,
            index_raw,
            ngram_next,
            rope,
            streams.flatten(1) if self.hc_mixer is not None else None,
        )

    @contextmanager
    def gathering_ple_rows(self, lookups: Sequence[RowLookup] | None) -> Iterator[None]:
        """Inside the block, PLE layer p takes its rows from ``lookups[p]`` (None: its table)."""
        previous, self.ple_lookups = self.ple_lookups, None if lookups is None else list(lookups)
        try:
            yield
        finally:
            self.ple_lookups = previous

    def _ple_inputs(
        self,
        inputs: PackedInputs,
        meta: PackedMeta,
        state: ModelState,
        ple_rows: list[Tensor | None] | None,
    ) -> tuple[PleInputs | None, Tensor | None]:
        """What the PLE layers read, and the n-gram context after each packed token."""
        if self.config.ngram_ple is None:
            return None, None
        contexts = state.ngram_context[meta.state_rows]  # [R, ngram_size - 1]
        rows = meta.token_row.clamp(max=meta.capacity.batch_capacity - 1)
        following = next_context(inputs.token_ids, contexts, rows, meta.token_offset)
        per_layer: Sequence[Tensor | RowLookup | None] = [None] * self.config.num_ple_layers
        if ple_rows is not None:
            per_layer = ple_rows
        elif self.ple_lookups is not None:
            per_layer = self.ple_lookups
        return PleInputs(inputs.token_ids, contexts, list(per_layer)), following

    def project(self, hidden: Tensor) -> Tensor:
        """Final-normed hidden states -> fp32 vocabulary logits (a zero row stays zero)."""
        return self.lm_head(hidden).float()

    @torch.no_grad()
    def commit(self, out: TargetOutput, decode_commit_lens: Tensor) -> None:
        """Apply the prompt chunk in full and each decode row's first ``decode_commit_lens``
        [R] positions; rows keeping nothing write the scratch row."""
        meta, state = out.meta, out.state
        commit_lens = torch.minimum(decode_commit_lens.long(), meta.decode_lens)
        is_kept = commit_lens > 0
        decode_rows = torch.where(is_kept, meta.state_rows, meta.scratch_row)
        position = (commit_lens - 1).clamp(min=0)
        row_index = torch.arange(commit_lens.shape[0], device=commit_lens.device)
        prompt_row = meta.prompt_state_row
        for g, update in enumerate(out.gdn_updates):
            state.gdn_state[g, decode_rows] = kept_candidates(
                update.decode_states, row_index, position
            )
            state.conv_window[g, decode_rows] = kept_candidates(
                update.decode_windows, row_index, position
            )
            state.gdn_state[g, prompt_row] = update.prompt_state
            state.conv_window[g, prompt_row] = update.prompt_window
        for p, update in enumerate(out.ple_updates):
            state.ple_window[p, decode_rows] = kept_candidates(
                update.decode_windows, row_index, position
            )
            state.ple_window[p, prompt_row] = update.prompt_window
        if out.ngram_next is not None:
            following = gather_rows(out.ngram_next, meta.decode_index)  # [R, W, n - 1]
            state.ngram_context[decode_rows] = following[row_index, position]
            last = meta.cu_query_lens[meta.prompt_row].long() + meta.prompt_len.long() - 1  # [L]
            state.ngram_context[prompt_row] = out.ngram_next[last.clamp(min=0)]
        if out.index_raw:
            keep_index_ring(out, commit_lens)
        seq_lens = state.seq_lens.clone()
        seq_lens[decode_rows] += commit_lens.to(seq_lens.dtype)
        seq_lens[prompt_row] += meta.prompt_len
        seq_lens[meta.scratch_row] = 0
        state.seq_lens.copy_(seq_lens)

    def absorb_draft_context(
        self, out: TargetOutput, next_tokens: Tensor, absorb_lens: Tensor
    ) -> None:
        """Run the MTP head over each row's first ``absorb_lens`` positions; ``next_tokens``
        [T] is the token following each packed position. Keeps the last absorbed MTP hidden."""
        if self.mtp is None:
            return
        meta, state = out.meta, out.state
        lens = absorb_lens.long()
        row = meta.token_row.clamp(max=lens.shape[0] - 1)
        is_absorbed = meta.is_token_valid & (meta.token_offset < lens[row])
        kv_slots = torch.where(is_absorbed, meta.kv_slots, -1)
        embeds = self.embed_tokens(next_tokens.clamp(min=0))
        if isinstance(self.mtp, GatedMtpHead):
            assert out.streams is not None
            g, raw_keys = self.mtp(embeds, out.streams, meta, state, kv_slots)
            if raw_keys:
                keep_mtp_ring(out, lens, raw_keys)
        else:
            g = self.mtp(embeds, out.hidden, meta, state, kv_slots)
        last = (meta.cu_query_lens[:-1].long() + lens - 1).clamp(min=0)
        rows = torch.where(lens > 0, meta.state_rows, meta.scratch_row)
        state.mtp_hidden[rows] = g[last].to(state.mtp_hidden.dtype)

    def draft_logits(self, mtp_hidden: Tensor) -> Tensor:
        """MTP hidden [N, hidden] (gated: [N, S * hidden]) -> draft logits [N, vocab]."""
        assert self.mtp is not None
        if isinstance(self.mtp, GatedMtpHead):
            return self.lm_head(self.mtp.mix(mtp_hidden)).float()
        return self.lm_head(self.mtp.norm(mtp_hidden)).float()

    def draft_step(
        self,
        tokens: Tensor,
        mtp_hidden: Tensor,
        slot_ids: Tensor,
        position_offset: int,
        state: ModelState,
        rope_offset: Tensor | None = None,
        selections: DraftSelections | None = None,
    ) -> Tensor:
        """One recursive MTP step per row at position committed + ``position_offset``: tokens
        [B], mtp_hidden [B, hidden], slot_ids [B] (-1 inactive) -> new MTP hidden [B, hidden].
        Writes draft KV (overwritten on verification); ``selections`` reuses QSA selections."""
        assert self.mtp is not None
        num_rows = tokens.shape[0]
        capacity = PackedCapacity(num_rows, 1, 0, num_rows)
        # Query length 1 per lane so packed index == lane; slot -1 writes the scratch row.
        ones = torch.ones(num_rows, dtype=torch.int32, device=tokens.device)
        no_prompt = torch.full((1,), -1, dtype=torch.int32, device=tokens.device)
        meta = PackedMeta.build(capacity, ones, slot_ids, no_prompt, state, position_offset)
        if rope_offset is not None:  # one token per lane: packed index == lane
            meta.rope_positions = (meta.positions + rope_offset.long())[None].repeat(3, 1)
        embeds = self.embed_tokens(tokens.clamp(min=0))
        if isinstance(self.mtp, GatedMtpHead):
            g, raw_keys = self.mtp(
                embeds,
                mtp_hidden,
                meta,
                state,
                meta.kv_slots,
                is_draft=True,
                selections=selections,
                position_offset=position_offset,
            )
            if raw_keys:
                keep_draft_ring(meta, state, raw_keys)
            return g
        if self.config.mtp_feeds_normed_hidden:
            mtp_hidden = self.mtp.norm(mtp_hidden)
        return self.mtp(embeds, mtp_hidden, meta, state, meta.kv_slots)
