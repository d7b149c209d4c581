"""Finding a decoder layer's ops among the calls of an imported model (``frontend.decoder``):
other spellings of the same op are found (RMSNorm as a division by a square root without a
weight, attention without grouped heads and with an -inf mask), a mask that is not causal is
left to the per-call mapping, and what is imported computes what PyTorch computes. The whole
Llama layer is in tests/engine/models/test_zoo.py and test_import.py."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from workbench.engine.models.frontend import import_module
from workbench.engine.build.program import make_program

torch = pytest.importorskip("torch")
F = torch.nn.functional


class Variants(torch.nn.Module):
    """RMSNorm without a weight as x / sqrt(mean(x * x) + eps); multi-head attention (q = k = v)
    scaled by a multiply, with float32's -inf above the diagonal; the same attention with a
    random mask (not causal); SiLU alone."""

    def __init__(self, seq: int) -> None:
        super().__init__()
        allowed = torch.ones(seq, seq, dtype=torch.bool).tril()
        self.register_buffer("causal", torch.zeros(seq, seq).masked_fill(~allowed, float("-inf")), persistent=False)
        gen = torch.Generator().manual_seed(0)
        self.register_buffer("noise", torch.rand(seq, seq, generator=gen), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-6)
        a = torch.softmax(y @ y.transpose(-1, -2) * 0.5 + self.causal, dim=-1) @ y
        b = torch.softmax(y @ y.transpose(-1, -2) + self.noise, dim=-1) @ y
        return F.silu(a) + b


def test_other_spellings_are_found_and_a_mask_that_is_not_causal_is_not():
    module = Variants(7).eval()
    x = np.random.default_rng(0).uniform(-1, 1, (1, 3, 7, 8)).astype("float32")
    graph = import_module(module, (torch.from_numpy(x),), "variants")
    kinds = Counter(n.type for n in graph.nodes)
    assert kinds["rms_norm"] == 1 and kinds["attention"] == 1 and kinds["silu"] == 1
    assert kinds["softmax"] == 1 and kinds["matmul"] == 2  # the noisy mask: per-call mapping
    rms = next(n for n in graph.nodes if n.type == "rms_norm")
    assert dict(rms.attrs)["eps"] == pytest.approx(1e-6) and np.all(graph.values[rms.inputs[1]] == 1.0)
    attn = next(n for n in graph.nodes if n.type == "attention")
    assert dict(attn.attrs) == {"causal": True, "scale": 0.5}
    got = make_program(graph).build().run({**graph.random_inputs(0), graph.inputs[0]: x})
    with torch.no_grad():
        want = module(torch.from_numpy(x)).numpy()
    out = got[graph.outputs[0]]
    assert np.abs(out - want).max() / np.abs(want).max() < 1e-4
