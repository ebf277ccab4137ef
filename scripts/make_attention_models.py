#!/usr/bin/python3
"""Small attention modules exported from PyTorch, for the attention pass's
tests (tests/unit/test_attention_fusion.c): the forms torch writes, not the
Hugging Face one.  Run with Debian's interpreter (it has torch and onnx):

    /usr/bin/python3 scripts/make_attention_models.py [OUT_DIR]

OUT_DIR defaults to tests/data/attention.  Fixed seed, random weights,
static shapes (batch 2, sequence 7, embedding 16, 2 or 4 heads), opset 13,
do_constant_folding=False (as the real models are exported): each file is a
few KB.  torch.nn.functional.scaled_dot_product_attention exists from torch
2.0; with an older torch the two torch_sdpa* models are written the way
torch's exporter decomposes it (q and k^T each scaled by sqrt(scale), then
MatMul, Add mask, Softmax, MatMul).
"""
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

B, S, E = 2, 7, 16


class MHA(nn.Module):
    """nn.MultiheadAttention (one packed in_proj weight), batch_first."""

    def __init__(self, heads, need_weights, with_mask):
        super().__init__()
        self.att = nn.MultiheadAttention(E, heads, batch_first=True)
        self.need_weights = need_weights
        self.with_mask = with_mask

    def forward(self, x, mask):
        y, w = self.att(x, x, x, need_weights=self.need_weights,
                        attn_mask=mask if self.with_mask else None)
        return (y, w) if self.need_weights else y


def sdpa(q, k, v, mask=None, scale=None):
    if hasattr(F, "scaled_dot_product_attention"):
        if scale is None:
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = math.sqrt(scale)
    w = (q * s) @ (k.transpose(-2, -1) * s)
    if mask is not None:
        w = w + mask
    return torch.softmax(w, dim=-1) @ v


class SDPA(nn.Module):
    """[B, S, E] -> three projections -> [B, H, S, D] -> sdpa -> [B, S, E]."""

    def __init__(self, heads, with_mask, scale=None):
        super().__init__()
        self.h = heads
        self.q, self.k, self.v = nn.Linear(E, E), nn.Linear(E, E), nn.Linear(E, E)
        self.with_mask = with_mask
        self.scale = scale

    def forward(self, x, mask):
        d = E // self.h
        q, k, v = (p(x).view(B, S, self.h, d).transpose(1, 2)
                   for p in (self.q, self.k, self.v))
        o = sdpa(q, k, v, mask if self.with_mask else None, self.scale)
        return o.transpose(1, 2).reshape(B, S, E)


class ViT(nn.Module):
    """timm's Attention: qkv Linear, reshape/permute to [3, B, H, S, D],
    unbind, q * scale, q @ k^T, softmax, @ v."""

    def __init__(self, heads):
        super().__init__()
        self.h = heads
        self.qkv = nn.Linear(E, 3 * E)
        self.proj = nn.Linear(E, E)

    def forward(self, x, mask):
        d = E // self.h
        qkv = self.qkv(x).reshape(B, S, 3, self.h, d).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        q = q * d ** -0.5
        a = (q @ k.transpose(-2, -1)).softmax(dim=-1)
        return self.proj((a @ v).transpose(1, 2).reshape(B, S, E))


def export(model, name, out_dir, with_mask_input):
    torch.manual_seed(0)
    for p in model.parameters():
        nn.init.uniform_(p, -0.5, 0.5)
    model.eval()
    x = torch.randn(B, S, E)
    mask = torch.randn(S, S)
    args = (x, mask)
    names = ["x", "mask"]
    if not with_mask_input:
        # the mask input is unused: export a module of x alone
        class Wrap(nn.Module):
            def __init__(self, m):
                super().__init__()
                self.m = m

            def forward(self, x):
                return self.m(x, None)

        model, args, names = Wrap(model), (x,), ["x"]
    path = os.path.join(out_dir, name + ".onnx")
    torch.onnx.export(model, args, path, opset_version=13, input_names=names,
                      do_constant_folding=False)
    print(path, os.path.getsize(path), "bytes")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        here, "..", "tests", "data", "attention")
    os.makedirs(out_dir, exist_ok=True)
    torch.manual_seed(0)
    export(MHA(2, False, False), "torch_mha_packed", out_dir, False)
    export(MHA(4, True, False), "torch_mha_weights", out_dir, False)
    export(MHA(2, False, True), "torch_mha_mask", out_dir, True)
    export(SDPA(2, True), "torch_sdpa", out_dir, True)
    export(SDPA(4, False, scale=0.3), "torch_sdpa_scale", out_dir, False)
    export(ViT(2), "torch_vit_qkv", out_dir, False)


if __name__ == "__main__":
    main()
