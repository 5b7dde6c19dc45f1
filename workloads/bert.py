"""BERT-Base and BERT-Large pre-training (BertForPreTraining: masked LM + next sentence), random init.

Defaults (the study's, Shi et al. 2021): BERT-Base batch 64, BERT-Large batch 8, sequence 64, vocabulary padded to
30528 (a multiple of 64, as NVIDIA's BERT recipes do). Dropout is 0 so that every method can be proven
lossless against single-process training; its compute cost is negligible next to the matmuls.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from workloads.base import WorkloadSpec, register

VOCAB = 30528


def _builder(cfg: dict):
    def build() -> torch.nn.Module:
        from transformers import BertConfig, BertForPreTraining

        return BertForPreTraining(BertConfig(**cfg))

    return build


def _make_batch(batch: int, seq_len: int = 64, device="cpu", seed: int = 0) -> dict:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, VOCAB, (batch, seq_len), generator=g)
    mlm = torch.randint(0, VOCAB, (batch, seq_len), generator=g)
    nsp = torch.randint(0, 2, (batch,), generator=g)
    tt = torch.zeros(batch, seq_len, dtype=torch.long)
    tt[:, seq_len // 2 :] = 1
    out = {"input_ids": ids, "token_type_ids": tt, "mlm_labels": mlm, "nsp_labels": nsp}
    return {k: v.to(device) for k, v in out.items()}


def _loss(model: torch.nn.Module, batch: dict) -> torch.Tensor:
    out = model(input_ids=batch["input_ids"], token_type_ids=batch["token_type_ids"])
    mlm = F.cross_entropy(out.prediction_logits.reshape(-1, VOCAB), batch["mlm_labels"].reshape(-1))
    nsp = F.cross_entropy(out.seq_relationship_logits, batch["nsp_labels"])
    return mlm + nsp


def _spec(name, layers, hidden, heads, batch, description):
    cfg = dict(
        vocab_size=VOCAB,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=4 * hidden,
        max_position_embeddings=512,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    return register(
        WorkloadSpec(
            name=name,
            family="bert",
            build=_builder(cfg),
            make_batch=_make_batch,
            loss=_loss,
            batch=batch,
            seq_len=64,
            sample_unit="seq",
            description=description,
            config=cfg,
        )
    )


_spec("bert-base", 12, 768, 12, 64, "BERT-Base pre-training (110M), seq 64, batch 64 (the study's)")
_spec("bert-large", 24, 1024, 16, 8, "BERT-Large pre-training (340M), seq 64, batch 8 (the study's)")
_spec("bert-base-tiny", 2, 128, 2, 8, "BERT family, 2 layers x 128 hidden, full vocabulary, for CPU/CI")
_spec("bert-large-tiny", 4, 256, 4, 4, "BERT family, 4 layers x 256 hidden, full vocabulary, for CPU/CI")
