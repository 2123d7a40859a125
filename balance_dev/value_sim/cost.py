"""The step time of a lockstep MoE forward: what each rank carries (``RankLoad``) and what it costs (``CostModel``).

The defaults and where they come from: docs/value.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class RankLoad:
    """What one rank carries in one forward: scheduled tokens, of which prompt tokens, and KV read."""

    tokens: int = 0
    prefill_tokens: int = 0
    context: int = 0  # sum over scheduled requests of their context length after this step


@dataclass(frozen=True)
class CostModel:
    """Lockstep MoE step time. Defaults: see docs/value.md.

    Cited: DeepSeek's published V3/R1 serving statistics (open-infra-index, "Day 6: Inference System
    Overview", H800, EP across nodes): 73.7k prefill tokens/s per 8-GPU node, i.e. about 0.11 ms per
    prompt token per GPU (``token_ms + expert_token_ms``), and 20-22 output tokens/s per user, i.e. a
    decode step of about 45-50 ms (``base_ms`` + a full batch's token and attention terms).
    Assumed: the split of the 0.11 ms between the rank's own layers (attention, dense: ``token_ms``)
    and the experts spread over the group (``expert_token_ms``), the attention cost per context token
    (``context_us``), and the extra cost of a step that carries prefill (``prefill_ms``: decode-only
    steps replay a captured graph, mixed steps do not).
    """

    base_ms: float = 35.0  # per step, every rank (weights read, all-to-all latency, launch)
    token_ms: float = 0.05  # per token scheduled on this rank
    context_us: float = 0.5  # per context token this rank's attention reads
    prefill_ms: float = 5.0  # once per rank that carries any prompt tokens
    expert_token_ms: float = 0.06  # per token of the whole group, divided by DP (experts spread over EP)

    def rank_ms(self, load: RankLoad) -> float:
        return (
            self.base_ms
            + self.token_ms * load.tokens
            + self.context_us * 1e-3 * load.context
            + (self.prefill_ms if load.prefill_tokens else 0.0)
        )

    def step_s(self, loads: Sequence[RankLoad]) -> float:
        """All ranks wait for the slowest (MoE all-to-all every layer); experts see everyone's tokens."""
        total = sum(load.tokens for load in loads)
        return (max(self.rank_ms(load) for load in loads) + self.expert_token_ms * total / len(loads)) / 1000.0

    @classmethod
    def flat(cls, ms: float = 40.0) -> CostModel:
        """Every step costs the same, whatever it carries (the model in which balance cannot pay)."""
        return cls(base_ms=ms, token_ms=0.0, context_us=0.0, prefill_ms=0.0, expert_token_ms=0.0)
