"""Backward lines on a GPU: a small GPT-like training step (torch only, no downloads) puts at least
90 % of its backward's GPU time on the lines of this file that ran the forward ops, marked as
backward in by_line(), the collapsed stacks and the trace (issue 22 item 4)."""

import json
import os
from pathlib import Path

import pytest
from source_lines import line_of

import gpuprofile as gp

pytestmark = pytest.mark.gpu

if gp.device_count() == 0:  # pragma: no cover
    pytest.skip("needs a CUDA device", allow_module_level=True)

torch = pytest.importorskip("torch")
F = torch.nn.functional
HERE = os.path.abspath(__file__)


def at(marker):
    """'this file:line' of the line holding `marker` in a comment."""
    return line_of(HERE, marker)


class Block(torch.nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.up, self.down = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)  # G-qkv
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # G-attn
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))  # G-proj
        return x + self.down(F.gelu(self.up(self.ln2(x))))  # G-mlp


class TinyGPT(torch.nn.Module):
    def __init__(self, vocab=4096, d=256, heads=4, layers=4, ctx=256):
        super().__init__()
        self.tok, self.pos = torch.nn.Embedding(vocab, d), torch.nn.Embedding(ctx, d)
        self.blocks = torch.nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = torch.nn.LayerNorm(d)
        self.head = torch.nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight  # tied, as GPT-2's

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))  # G-embed
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))  # G-head


def _step(model, opt, idx, target):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits = model(idx)
        loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), target.view(-1))  # G-loss
    with gp.region("backward"):
        loss.backward()  # G-backward
    opt.step()
    opt.zero_grad(set_to_none=True)


def test_a_transformer_steps_backward_lands_on_user_lines(tmp_path):
    torch.manual_seed(0)
    model = TinyGPT().cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    idx = torch.randint(0, 4096, (8, 256), device="cuda")
    target = torch.randint(0, 4096, (8, 256), device="cuda")
    for _ in range(3):
        _step(model, opt, idx, target)
    torch.cuda.synchronize()
    with gp.profile(memory=False, python_stacks="line") as p:
        _step(model, opt, idx, target)
        torch.cuda.synchronize()
    assert p.python_lines.autograd is None, p.python_lines.autograd
    k = p.kernels
    bwd = k[k["region"] == "backward"]
    total = int(bwd["duration_ns"].sum())
    on_user = bwd["python_line"].astype(str)
    user = [line.startswith(HERE + ":") for line in on_user]
    share = int(bwd["duration_ns"][user].sum()) / total
    missed = {}
    for line, d in zip(on_user, bwd["duration_ns"], strict=True):
        if not line.startswith(HERE + ":"):
            missed[line] = missed.get(line, 0) + int(d)
    assert len(bwd) > 50 and share >= 0.90, (share, missed)
    # each op's backward on its own forward line
    lines = set(on_user)
    for marker in ("G-qkv", "G-attn", "G-proj", "G-mlp", "G-head", "G-embed", "G-loss"):
        assert at(marker) + " (backward)" in lines, (marker, sorted(lines))
    # by_line: a line's forward and backward rows apart
    rows = {(r["line"], r["backward"]) for r in p.by_line().rows}
    assert (at("G-attn"), True) in rows and (at("G-attn"), False) in rows
    text = Path(p.export_collapsed_stacks(tmp_path / "s.txt")).read_text()
    assert f"({at('G-attn')});[backward];" in text
    trace = json.loads(Path(p.export_chrome_trace(tmp_path / "t.json")).read_text())
    marked = [e for e in trace["traceEvents"] if e.get("cat") == "kernel"
              and e.get("args", {}).get("python", "").endswith(" (backward)")]
    assert len(marked) >= len(bwd) * 0.9 - 2
