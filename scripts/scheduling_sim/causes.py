"""The measured causes of ``docs/capacity.md`` ("Causes (measured)"): text, with the command
behind each number, kept apart from the study's rendering code."""

from __future__ import annotations

CAUSES = """## Causes (measured)

Frame-by-frame numbers come from the simulator's instrument,
`python -m scripts.scheduling_sim.frame_mix --slots 32 --load L --policies P` (per frame
class: device-time share, prompt tokens, decoders served and left waiting; the TTFT
split; which frames filled every TBT gap above 60 ms). Single what-if runs:
`python -m scripts.scheduling_sim.frame_mix --slots S --load L --policies helios+VARIANT
--ttft-guard-s 10` (the guard stops an overloaded run as the capacity search does).

- **The best baseline already runs at the device's decode ceiling (no policy can reach
  1.1x at the TTFT-bound SLOs).** Once every slot decodes, capacity is output tokens per
  ms, and on this MoE a frame of 32 rows reads every expert whatever it holds (about
  52-57 ms), so the only lever is target tokens per row, capped by the acceptance at
  E[out] = 2.93 (five drafts). The ceiling table below (`python -m
  scripts.scheduling_sim.ceiling`) gives the best frame over every batch and width: with
  a prompt chunk riding along, 1.646 tokens/ms = 1.29 load units unbounded, 1.527 = 1.20
  at R = 128 (B x W <= R caps B = 32 at W = 4; `vllm-k5` verifies 6 rows each, 192
  tokens, outside any envelope). `vllm-k5`'s capacity at TBT 200 ms / TTFT 10 s, 1.414,
  is 1.09x that steady-state ceiling (the 10 s guard lets a backlog build over the
  122 s window), so a perfect scheduler on the R = 128 catalog reaches about
  1.20 x 1.09 = 1.31 load units (0.93x), and at R >= 192 at most a tie (1.0x). The
  1.1x target at TBT 100 ms / 5 s and 200 ms / 10 s is out of reach on this device
  model for any policy; the study's R = 128 (the issue's choice, within the recipe's
  maximum of 384) costs another 7%. At TBT 60 ms / TTFT 2 s the best baseline (1.022)
  sits below the ceiling, so 1.1x (1.124) is possible in principle there; Helios's gap
  at that SLO is the TBT cause below.
- **Mixed frames give decoders width one (seed's one-bucket sentence).** "Each batch
  bucket of at least two rows has every prompt bucket at verification width one and one
  prompt bucket for each wider width within the target-token envelope. The latter
  bucket minimizes max(P / P_min, P_max / P)" leaves wider mixed widths only at 512
  prompt tokens. At load 1.0 (32 slots) 20.2% of Helios's device time is mixed frames at
  width one (1463 prompt tokens, 27 decoders one token each in 56 ms) and 7.4% mixed at
  width four (305 prompt tokens); `vllm-k5` spends 28.2% in mixed steps that verify six
  rows per decoder. A mixed frame costs the same 55-56 ms at 512 and 3072 prompt tokens,
  so each width-one mixed frame costs every decoder about 1.7 tokens. What-if
  `helios+wide-mixed` (wider widths also at 2048): 1.297 against 1.139 at TBT 200 ms /
  TTFT 10 s (+14%). At R = 192 the wider widths lower p50 TPOT at load 1.41 from 22.3
  to 19.9 ms (`helios+r192` against `helios+wide-mixed+r192`); R = 192 alone changes
  little (22.4 ms at 1.19), because the width-one mixed frames remain.
- **Padded batch buckets against eager baselines (seed's capture rule and timing
  model).** "Ignition captures power-of-two request buckets through padded
  concurrency" and "a padded graph costs its physical capacities": between 17 and 31
  decoders Helios runs the B = 32 program. At width four it costs 51.3 / 51.5 / 51.7 /
  52.0 ms for 17 / 20 / 24 / 28 active rows where a baseline's eager batch of the same
  rows costs 41.9 / 44.9 / 48.1 / 50.4 ms (1.22x / 1.15x / 1.08x / 1.03x). At load 1.0
  Helios's p50 TPOT is 22.9 ms against 18.6 (`vllm-k3`) and 18.5 ms (`vllm-k5`); slots
  stay held longer, so its p99 TTFT there is 4.2 s against 1.8 and 1.7 s. (Durations
  at 1400 cached tokens per row.) Baselines padded as real vLLM pads (its capture
  sizes, steps of 8 tokens) lose no capacity, and Helios with step-8 batch buckets
  gains none: "Padding for fairness" above.
- **TBT at 60 ms: frames near 56 ms plus one skipped short frame.** Helios's p99 TBT is
  62.2 ms at load 0.5, 74.8 ms at 0.707 and 70.5 ms at 1.0 (`vllm-k3`: 59.0 ms at 1.0).
  At 0.707, 3.1% of its gaps exceed 60 ms: 65% are a decoder left out of a width-one
  B = 16 or B = 8 frame (more decoders than the bucket; the smaller bucket's
  throughput wins) and then served by a 52-56 ms speculative or mixed frame, 13% span
  a 4096-token prefill-only frame (61 ms, 16 decoders waiting). The design prices only
  the delay of the graph at hand (the age term c sigma (A + T) and T / 2 sum c), not
  the next frame of a decoder left out, and it rules out a cap: "There is no
  millisecond cap on either a frame or the sum of queued frames", "There is no
  smallest-fitting-shape filter, duration ceiling, forced oldest-request filter". What
  the seed does allow is
  load-time selection ("Load-time selection can reduce capacities only where those
  physical programs exist"): `helios+full-batch+chunk2048` (generation and mixed
  programs at B = 32 only, prompt capacities up to 2048) keeps p99 TBT at 58.7 / 59.8 /
  59.9 ms at loads 0.707 / 1.0 / 1.122, but its p99 TTFT at 1.0 is 4.7 s: the 60 ms /
  2 s pair is then bound by the 2 s TTFT guard, that is by throughput (the two causes
  above). In the quick search ("What-ifs" above) this selection lifts the 60 ms / 2 s
  capacity from 0.479 to 0.805 and costs 4% at TTFT 10 s (1.091 against 1.139) and
  much at low load (p50 TPOT 19.7 ms at 0.5: every frame is the B = 32 program); with
  the what-if catalog too (wider mixed widths at 2048, R = 192) it reaches 0.878 /
  1.189 / 1.354, 0.86x / 0.96x / 0.96x of the best baseline.
- **p50 TTFT at half load: the second frame slot (seed's transport).** Helios's TTFT
  at load 0.5 splits into 15.4 ms until the first prompt frame starts and 54.7 ms of
  frame; `vllm`'s into 4.8 ms and 54.6 ms. The whole 11 ms gap is the wait for the
  generation frame already queued in the second slot: "The transport has two frame
  slots. Only ordinary decode and complete speculative generation may occupy both.
  Prefill, scored prefill, mixed execution, ... drain the window." What-if
  `helios+one-frame` (plan only when the device is idle): p50 TTFT at load 0.5 is
  0.061 s (`vllm` 0.060 s) with p50 TPOT unchanged (13.7 ms). The simulator spends no
  host time between a completion and the next plan, so this measures what the sentence
  costs; on hardware an idle-time plan adds a host round trip per frame. The seed lets
  generation occupy both slots but does not say when the second is filled, so the
  runtime may ask for the second plan late: what-if `helios+late-queue` fills it 1 ms
  (a host round trip) before the frame ahead ends, with Helios's decisions and both
  slots unchanged. p50 TTFT at load 0.5: 0.062 s (6.5 ms until the first prompt frame
  starts, against 15.4 ms), p50 TPOT 13.7 ms; its quick search ("What-ifs") gives
  capacities equal to `helios`'s on the same grid (1.139 / 0.479 / 1.000 / 1.139). The
  remaining 1.7 ms of wait against `vllm` (6.5 against 4.8 ms) was not split further
  (a prompt arriving inside the lead still waits behind the queued frame). Not done:
  serving's dispatch loop (issue 15's) would have to call plan() for the second slot at
  that point; nothing in Helios changes.
- **The newcomer rule is not the remaining cause.** With the balanced rule a new prompt
  is taken at the first frame the window allows (the split above); the earlier
  normalizer start raised capacity by 2% and nearly tripled the half-load p50 TTFT
  (0.208 s against 0.071 s, `docs/scheduling.md`). The rule stays.
- **Adaptive width against fixed widths: the choice is the seed's balanced preset, the
  rest of the gap is the catalog.** "Adaptive against fixed widths" above runs Helios at
  each fixed width on its own catalog (`helios+wN`: fixed speculation, load-time
  selection of the width-N programs) beside adaptive Helios and `vllm-kK`
  (`python -m scripts.scheduling_sim.widths`). Under the seed's throughput preset
  adaptive Helios is below none of its fixed widths at any load measured: p50 TPOT
  12.0 / 19.6 / 23.1 ms at loads 0.5 / 0.707 / 1.0 (32 slots) against the best fixed
  13.3 / 21.7 / 24.4 ms, p99 TTFT 0.80 / 0.89 / 4.46 s against 0.82 / 1.09 / 6.08 s,
  and at 4 slots (R = 8, load 0.354) 5.9 ms and 4.32 s against 5.9 ms and 4.53 s. Under
  the balanced preset (the seed's defaults: "flare run defaults to --scheduler-policy
  balanced, which uses these coefficients", delivery fairness 4 and decode-age price
  0.1) adaptive keeps the lowest p99 TBT at every load (62 / 75 / 71 ms against 97 /
  161 / 166 ms for the best fixed width) but its p50 TPOT is 1.3 ms above `helios+w2`
  at 0.5 (13.7 against 12.4) and 0.5 ms above `helios+w4` at 0.707 (21.3 against 20.8);
  at 1.0 it is best (22.9 ms, 4.17 s against 23.3 ms, 4.70 s). A burst is one delivery
  whatever its width, so with five to eight decoders a 10 ms width-one frame buys more
  delivery value per ms than an 11-17 ms width-two frame (half of the device time at
  0.5 is width one, 1.32 target rows per decoder). At 4 slots the same preference costs
  capacity: `helios+r8` p99 TTFT 4.96 s against 3.96 s for `helios+r8+w2`. That is the
  measured size of the preset, a seed default and not something Helios's selection
  gets wrong; the target as written is met under the throughput preset and missed
  under the balanced one by those amounts. Against `vllm-kK` every Helios width loses
  alike, so the gap to the best fixed-K baseline is not the width choice: at load 1.0
  `helios+w4` and `vllm-k3` both verify four rows per decoder, 23.3 ms / 4.70 s against
  18.6 ms / 1.84 s. What every Helios width shares is the catalog: a width-N Helios has
  its width-N mixed program at the 512 prompt bucket only (the one-bucket cause above)
  and spends 15% of its device time at 1.0 in prefill-only frames with 27 decoders
  waiting, and its generation frames leave 0.5-1.4 resident decoders out (vLLM's none;
  a smaller power-of-two bucket costs less than the padded larger one, "Padded batch
  buckets" above; not split further). With wider mixed widths at 2048 too the fixed widths
  move most of the way (`helios+wide-mixed+w4` 20.3 ms / 2.25 s at 1.0 against
  `vllm-k3-padded` 18.6 ms / 1.69 s; `helios+wide-mixed+w3` 11.3 ms at 0.5 against
  `vllm-k2-padded` 10.3 ms). The same preset cost appears on that catalog
  (`helios+wide-mixed` 12.2 / 19.1 / 20.8 ms against 11.3 / 17.7 / 20.3 ms).
- **Acceptance estimates are not a cause.** `python -m scripts.scheduling_sim.acceptance
  --slots 32 --load 1.0 --policies helios,helios+step8` prints, every 20 s of simulated
  time and per depth, the population prior and the mean estimate of the live decoders
  against the truth: at load 1.0 the live estimates stay within 0.05 of the true prefix
  survivals 0.80 / 0.56 / 0.34 / 0.17 / 0.07 at every depth and every stretch, for
  both catalogs (the population prior, moving 1/64 per observation, within 0.10), on
  1500-9400 observations per depth and 20 s in `helios` (depths four and five fall
  under 100 in some stretches of `helios+step8`, whose live estimates still read
  0.12-0.19 and 0.04-0.08 for 0.168 and 0.067). The earlier spot check's
  `helios+trained` preseeded the conditional probabilities 0.8 / 0.7 / 0.6 / 0.5 / 0.4
  as prefix survivals (0.5 for s_4 against 0.168), a simulator defect now fixed: it
  preseeds the truth, and the spot check above is that run.
- **Four slots: the gap in four measured steps.** At the stock recipe every policy keeps
  all four slots busy; one draft per row (B = 4, W = 2, 8 target tokens) is the best
  frame (ceiling 0.704 tokens/ms against 0.641 at R = 6), but R = 6 prepares no B = 4,
  W = 2 graph. p99 TTFT at load 0.354 (one run each, "Adaptive against fixed widths"):
  `helios` 6.15 s; R = 8 (`helios+r8`, a build choice up to the recipe's maxima) 4.96 s;
  fixed width two on that catalog (`helios+r8+w2`) 3.96 s, the balanced preset's width
  one frames of the cause above (15.6% of device time at width one,
  `python -m scripts.scheduling_sim.frame_mix --slots 4 --load 0.354 --policies
  helios+r8,helios+r8+w2`); width two also in the 2048-token mixed program
  (`helios+r8+wide-mixed+w2`) 3.79 s, the one-bucket sentence (`helios+r8+w2` spends
  9.4% of device time in 529 prefill-only frames where `vllm-k1` mixes 1057-token
  chunks at width two); and `vllm-k1` 3.56 s eager, 3.74 s padded to vLLM's capture
  sizes, so the last 0.05 s against real vLLM's padding (0.23 s against an eager
  engine) is the padded buckets. In capacity ("What-ifs", quick mode, within about
  4.4%): `helios+r8` 0.420 and `helios+r8+w2` 0.439 at TTFT 10 s against `vllm-k1`'s
  0.459 (0.92x and 0.96x); 0.354 for both at TBT 100 ms / TTFT 5 s against 0.377. The
  wide-mixed step has no four-slot capacity search (the study leaves wide-mixed out
  below 8 slots).
- **Four slots at TBT 60 ms / TTFT 2 s: the 2 s TTFT guard binds, not the TBT bound, and
  0.000 was the search floor.** The study's searches start at 0.25 load units
  (`SEARCH_LO`); a policy failing there used to print 0.000, which read as "meets the pair
  at no load" (the page now prints `< 0.25`). At 0.25 Helios's p99 TTFT is 2.36 s (`vllm`
  2.40, `vllm-k3` 2.29, `sarathi` 3.77, `vllm-k1` 1.89 s) while its p99 TBT is 18.5 ms:
  0.09% of its gaps exceed 60 ms (46 of 91 span a prefill-only frame; `python -m
  scripts.scheduling_sim.frame_mix --slots 4 --load 0.25 --policies helios,vllm-k1`; at
  0.125, 0.05%). In every 4-slot run of the main study's searches every policy's p99 TBT
  stays at or under 56.0 ms (`vllm-k5`; Helios 52.9 ms at 0.402; with four slots the
  longest gap is one 53-56 ms prompt frame), so 60 ms binds nowhere below the loads the
  2-second guard allows; only the what-if `helios+r8+w2` crosses it (61.5 ms at 0.353, far
  above its 2 s load). Searched from 0.125 (`--lo 0.125`, quick mode, "What-ifs"): Helios
  meets the pair up to 0.220 (p99 TTFT 1.97 s, p99 TBT 17.5 ms at 0.219) against
  `vllm-k1`'s 0.261 (0.84x), and `helios+r8+w2` up to 0.239 (0.92x); the full-resolution
  search below gives Helios the same 0.220 (every number of this bullet is from the code
  before this pass merged main; after that merge (15b68ae), with main's Helios changes of
  the same pass, the same search gives Helios 0.215, 0.82x, one grid step lower). So this
  gap is the four-slot throughput gap of the bullet above at a tighter guard, in the same
  steps, p99 TTFT at 0.25 (one run each, `frame_mix --slots 4 --load 0.25 --policies P`):
  `helios` 2.36 s; R = 8 (`helios+r8`, a build choice within the recipe's maxima; R = 6
  prepares no B = 4, W = 2 graph, so with three or four decoders Helios runs width one
  (16.2% of device time, 3.1 decoders a frame) or the ragged B = 4 program of six rows
  (6633 frames): 1.73 target tokens per decoder against `vllm-k1`'s 2.00, eight eager rows
  at B = 4) 2.23 s; fixed width two (`helios+r8+w2`: the balanced preset's width-one
  frames, 11.0% of `helios+r8`'s device time in generation and 4.8% in mixed frames at
  width one) 2.07 s; width two also in the 2048-token mixed program
  (`helios+r8+wide-mixed+w2`: the one-bucket sentence; `helios+r8+w2` spends 8.7% of
  device time in prefill-only frames with 1.3 decoders waiting, `vllm-k1` 3.4% and mixes
  1061-token chunks at width two) 1.95 s, which meets the guard; `vllm-k1` 1.89 s eager
  and 1.92 s padded to vLLM's capture sizes (`vllm-k1-padded`): the last 0.06 s (0.03 s
  against vLLM's own padding) was not split further. In capacity at the pair (`ignition
  simulate --trace conv.csv --rows 2000:2600 --slots 4 --speculative-token-capacity 6
  --capacity --slo 60:2 --compare POLICIES`, full resolution from 0.125, guard 2 s):
  `helios` 0.220 (0.84x of `vllm-k1`), `helios+r8` 0.229 (0.88x),
  `helios+r8+wide-mixed+w2` 0.255 (0.98x), `vllm-k1` 0.261, `vllm` 0.210, `vllm-k3` 0.224,
  `sarathi` 0.169 (Helios 1.04x `vllm`, 0.98x `vllm-k3`). Every run of that search that
  fails the pair fails on TTFT (stopped by the 2 s guard, p99 TBT at most 54.1 ms in any
  of its runs), none on TBT. Of these, Helios itself controls only the width choice under
  the balanced preset (value per ms prefers a width-one frame when it buys more delivery
  value, the seed's default coefficients, see "Adaptive width" above); R = 8 is a build
  choice and the mixed widths are the catalog's one-bucket sentence. Helios's decisions
  are unchanged in this pass.
"""
