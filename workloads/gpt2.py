"""GPT-2 small (124M) causal language model from transformers' GPT2Config, random init.

The study had no GPT; defaults here: batch 8 per worker, sequence 512 (half of GPT-2's context, a
common fine-tuning length). Dropout 0 (see workloads/bert.py for why).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from workloads.base import WorkloadSpec, register

VOCAB = 50257


def _builder(cfg: dict):
    def build() -> torch.nn.Module:
        from transformers import GPT2Config, GPT2LMHeadModel

        return GPT2LMHeadModel(GPT2Config(**cfg))

    return build


def _make_batch(batch: int, seq_len: int = 512, device="cpu", seed: int = 0) -> dict:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, VOCAB, (batch, seq_len + 1), generator=g)
    return {"input_ids": ids[:, :-1].contiguous().to(device), "labels": ids[:, 1:].contiguous().to(device)}


def _loss(model: torch.nn.Module, batch: dict) -> torch.Tensor:
    logits = model(input_ids=batch["input_ids"]).logits
    return F.cross_entropy(logits.reshape(-1, VOCAB), batch["labels"].reshape(-1))


def _spec(name, layers, hidden, heads, batch, seq_len, description):
    cfg = dict(
        vocab_size=VOCAB,
        n_embd=hidden,
        n_layer=layers,
        n_head=heads,
        n_positions=1024,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
    )
    return register(
        WorkloadSpec(
            name=name,
            family="gpt2",
            build=_builder(cfg),
            make_batch=_make_batch,
            loss=_loss,
            batch=batch,
            seq_len=seq_len,
            sample_unit="seq",
            description=description,
            config=cfg,
        )
    )


_spec("gpt2-small", 12, 768, 12, 8, 512, "GPT-2 small (124M) causal LM, seq 512, batch 8")
_spec("gpt2-small-tiny", 2, 128, 2, 8, 64, "GPT-2 family, 2 layers x 128 hidden, full vocabulary, for CPU/CI")
