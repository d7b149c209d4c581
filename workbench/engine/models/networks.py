"""Reference networks of the ALT paper's end-to-end study, written with ``torch.nn``.

torchvision's models do not import next to the CPU torch wheel here, so ResNet-18 and
MobileNet-V2 are restated from their papers (and torchvision's layer order, so the graphs match
the usual ones), a BERT-base encoder layer from the BERT paper, and a Llama decoder layer (in
its two phases, prefill and decode) in Hugging Face's formulation. Weights are seeded random
values; batch norms get random running statistics as well, so folding them into the convs is
actually exercised. The zoo imports these through ``importer`` like any user model.

Every builder returns ``(module, example_inputs)``; the module is in eval mode.
"""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["ResNet18", "MobileNetV2", "BertLayer", "LlamaLayer", "LlamaPrefill", "LlamaDecode", "resnet18",
           "mobilenet_v2", "bert_layer", "llama_layer_prefill", "llama_layer_decode", "randomize", "rotary_tables",
           "causal_mask"]


def randomize(module: nn.Module, seed: int) -> nn.Module:
    """Seeded random weights, and non-trivial batch-norm statistics and affine parameters."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                fan_in = m.weight[0].numel()
                m.weight.uniform_(-1 / math.sqrt(fan_in), 1 / math.sqrt(fan_in), generator=gen)
                if m.bias is not None:
                    m.bias.uniform_(-0.1, 0.1, generator=gen)
            elif isinstance(m, nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5, generator=gen)
                m.bias.uniform_(-0.2, 0.2, generator=gen)
                m.running_mean.uniform_(-0.2, 0.2, generator=gen)
                m.running_var.uniform_(0.5, 1.5, generator=gen)
            elif isinstance(m, nn.LayerNorm):
                m.weight.uniform_(0.5, 1.5, generator=gen)
                m.bias.uniform_(-0.2, 0.2, generator=gen)
            elif isinstance(m, RMSNorm):
                m.weight.uniform_(0.5, 1.5, generator=gen)
    return module.eval()


########## ResNet-18 ##########

def _conv_bn(cin: int, cout: int, k: int, stride: int = 1, groups: int = 1) -> list[nn.Module]:
    return [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]


class _BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.body = nn.Sequential(*_conv_bn(cin, cout, 3, stride), nn.ReLU(), *_conv_bn(cout, cout, 3))
        self.down = nn.Sequential(*_conv_bn(cin, cout, 1, stride)) if stride != 1 or cin != cout else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.body(x) + self.down(x))


class ResNet18(nn.Module):
    """ResNet-18 (He et al. 2016): a 7x7 stem, four stages of two basic blocks, a classifier.
    ``width`` scales the channels (64 is the real network)."""

    def __init__(self, width: int = 64, classes: int = 1000) -> None:
        super().__init__()
        w = [width, 2 * width, 4 * width, 8 * width]
        layers: list[nn.Module] = [nn.Conv2d(3, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
                                   nn.MaxPool2d(3, 2, 1)]
        cin = width
        for i, c in enumerate(w):
            layers += [_BasicBlock(cin, c, 1 if i == 0 else 2), _BasicBlock(c, c, 1)]
            cin = c
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, classes)

    def forward(self, data: torch.Tensor) -> torch.Tensor:  # the zoo's input name
        x = nn.functional.adaptive_avg_pool2d(self.features(data), 1)
        return self.fc(torch.flatten(x, 1))


########## MobileNet-V2 ##########

def _conv_bn_relu6(cin: int, cout: int, k: int, stride: int = 1, groups: int = 1) -> list[nn.Module]:
    return [*_conv_bn(cin, cout, k, stride, groups), nn.ReLU6()]


class _InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = cin * expand
        layers = _conv_bn_relu6(cin, hidden, 1) if expand != 1 else []
        layers += [*_conv_bn_relu6(hidden, hidden, 3, stride, groups=hidden), *_conv_bn(hidden, cout, 1)]
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x) if self.residual else self.body(x)


class MobileNetV2(nn.Module):
    """MobileNet-V2 (Sandler et al. 2018), width multiplier 1.0: inverted residual blocks with
    depthwise 3x3 convs and ReLU6, then a 1x1 conv to 1280 channels and a classifier."""

    #: (expansion, channels, blocks, stride of the first block), the paper's Table 2
    SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                (6, 320, 1, 1))

    def __init__(self, classes: int = 1000, settings: tuple = SETTINGS) -> None:
        super().__init__()
        layers: list[nn.Module] = _conv_bn_relu6(3, 32, 3, 2)
        cin = 32
        for t, c, n, s in settings:
            for i in range(n):
                layers.append(_InvertedResidual(cin, c, s if i == 0 else 1, t))
                cin = c
        layers += _conv_bn_relu6(cin, 1280, 1)
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(1280, classes)

    def forward(self, data: torch.Tensor) -> torch.Tensor:  # the zoo's input name
        x = nn.functional.adaptive_avg_pool2d(self.features(data), 1)
        return self.classifier(torch.flatten(x, 1))


########## BERT-base encoder layer ##########

class BertLayer(nn.Module):
    """One BERT encoder layer (Devlin et al. 2019) on (batch, seq, hidden): multi-head
    self-attention with explicit Q/K/V projections, then the GELU feed-forward, each with a
    residual add and a post layer norm (eps 1e-12, as BERT). No attention mask, no dropout."""

    def __init__(self, hidden: int = 768, heads: int = 12, ffn: int = 3072) -> None:
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.out = (nn.Linear(hidden, hidden) for _ in range(4))
        self.ln1, self.ln2 = nn.LayerNorm(hidden, eps=1e-12), nn.LayerNorm(hidden, eps=1e-12)
        self.ffn1, self.ffn2 = nn.Linear(hidden, ffn), nn.Linear(ffn, hidden)

    def forward(self, data: torch.Tensor) -> torch.Tensor:  # the zoo's input name
        x = data
        b, s, h = x.shape
        dh = h // self.heads

        def heads(t: torch.Tensor) -> torch.Tensor:
            return t.reshape(b, s, self.heads, dh).transpose(1, 2)

        q, k, v = heads(self.q(x)), heads(self.k(x)), heads(self.v(x))
        p = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(dh), dim=-1)
        ctx = (p @ v).transpose(1, 2).reshape(b, s, h)
        y = self.ln1(x + self.out(ctx))
        return self.ln2(y + self.ffn2(nn.functional.gelu(self.ffn1(y))))


########## Llama decoder layer (prefill and decode) ##########

class RMSNorm(nn.Module):
    """Root-mean-square norm over the last dim (Zhang & Sennrich 2019), as Llama writes it."""

    def __init__(self, hidden: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def rotary_tables(positions: range, head_dim: int, base: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin (len(positions), head_dim) of rotary embedding (Su et al. 2021), the two
    halves of the head dim with the same frequencies (Llama's rotate-half form)."""
    inv = 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    ang = torch.outer(torch.tensor(list(positions), dtype=torch.float64), inv)
    ang = torch.cat((ang, ang), dim=-1)
    return ang.cos().float(), ang.sin().float()


def causal_mask(queries: int, keys: int) -> torch.Tensor:
    """The additive causal mask (queries, keys): query i, at position keys - queries + i, sees
    the keys up to its own position; the others get float32's lowest value (as Hugging Face)."""
    allowed = torch.ones(queries, keys, dtype=torch.bool).tril(keys - queries)
    return torch.zeros(queries, keys).masked_fill(~allowed, torch.finfo(torch.float32).min)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class LlamaLayer(nn.Module):
    """One Llama decoder layer (Touvron et al. 2023): pre-RMSNorm grouped-query attention with
    rotary embedding and a causal mask, then a pre-RMSNorm SiLU-gated MLP, each with a residual
    add. Defaults are TinyLlama-1.1B's sizes. ``forward`` takes the rotary tables, the additive
    mask (or None) and optionally the K/V cache; it returns the hidden states and the new K/V."""

    def __init__(self, hidden: int = 2048, heads: int = 32, kv_heads: int = 4, mlp: int = 5632,
                 eps: float = 1e-5) -> None:
        super().__init__()
        if hidden % heads or heads % kv_heads:
            raise ValueError(f"hidden {hidden} must divide into {heads} heads, and they into {kv_heads} groups")
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, hidden // heads
        self.q = nn.Linear(hidden, hidden, bias=False)
        self.k, self.v = (nn.Linear(hidden, kv_heads * self.head_dim, bias=False) for _ in range(2))
        self.o = nn.Linear(hidden, hidden, bias=False)
        self.gate, self.up = nn.Linear(hidden, mlp, bias=False), nn.Linear(hidden, mlp, bias=False)
        self.down = nn.Linear(mlp, hidden, bias=False)
        self.norm1, self.norm2 = RMSNorm(hidden, eps), RMSNorm(hidden, eps)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, mask: torch.Tensor | None,
                past_k: torch.Tensor | None = None, past_v: torch.Tensor | None = None) -> tuple:
        b, s, h = x.shape
        d, rep = self.head_dim, self.heads // self.kv_heads

        def heads(t: torch.Tensor, n: int) -> torch.Tensor:
            return t.reshape(b, s, n, d).transpose(1, 2)

        def repeat_kv(t: torch.Tensor) -> torch.Tensor:  # Hugging Face's repeat_kv
            n, length = t.shape[1], t.shape[2]
            return t[:, :, None].expand(b, n, rep, length, d).reshape(b, n * rep, length, d)

        y = self.norm1(x)
        q, k, v = heads(self.q(y), self.heads), heads(self.k(y), self.kv_heads), heads(self.v(y), self.kv_heads)
        q, k = q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin
        if past_k is not None:
            k, v = torch.cat((past_k, k), dim=2), torch.cat((past_v, v), dim=2)
        scores = q @ repeat_kv(k).transpose(-1, -2) / math.sqrt(d)
        if mask is not None:
            scores = scores + mask
        ctx = (torch.softmax(scores, dim=-1) @ repeat_kv(v)).transpose(1, 2).reshape(b, s, h)
        x = x + self.o(ctx)
        y = self.norm2(x)
        return x + self.down(nn.functional.silu(self.gate(y)) * self.up(y)), k, v


class LlamaPrefill(nn.Module):
    """The prompt phase: ``seq`` tokens at positions 0.. with the causal mask; returns the
    hidden states and the K/V cache (batch, kv_heads, seq, head_dim) of the prompt."""

    def __init__(self, layer: LlamaLayer, seq: int, base: float = 10000.0) -> None:
        super().__init__()
        self.layer = layer
        cos, sin = rotary_tables(range(seq), layer.head_dim, base)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        self.register_buffer("mask", causal_mask(seq, seq), persistent=False)

    def forward(self, data: torch.Tensor) -> tuple:  # the zoo's input name
        return self.layer(data, self.cos, self.sin, self.mask)


class LlamaDecode(nn.Module):
    """One generation step: one token at position ``past`` after a K/V cache of ``past``
    positions (no mask needed: the new token sees them all); returns the hidden state and
    the cache with the token's K/V appended (``past + 1`` positions)."""

    def __init__(self, layer: LlamaLayer, past: int, base: float = 10000.0) -> None:
        super().__init__()
        self.layer = layer
        cos, sin = rotary_tables(range(past, past + 1), layer.head_dim, base)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, data: torch.Tensor, past_k: torch.Tensor, past_v: torch.Tensor) -> tuple:
        return self.layer(data, self.cos, self.sin, None, past_k, past_v)


########## Builders: (module, example inputs) ##########

def resnet18(batch: int = 1, image: int = 224, width: int = 64, seed: int = 0) -> tuple[nn.Module, tuple]:
    return randomize(ResNet18(width), seed), (torch.zeros(batch, 3, image, image),)


def mobilenet_v2(batch: int = 1, image: int = 224, seed: int = 0) -> tuple[nn.Module, tuple]:
    return randomize(MobileNetV2(), seed), (torch.zeros(batch, 3, image, image),)


def bert_layer(batch: int = 1, seq: int = 128, hidden: int = 768, heads: int = 12,
               seed: int = 0) -> tuple[nn.Module, tuple]:
    return randomize(BertLayer(hidden, heads, 4 * hidden), seed), (torch.zeros(batch, seq, hidden),)


def llama_layer_prefill(batch: int = 1, seq: int = 128, hidden: int = 2048, heads: int = 32, kv_heads: int = 4,
                        mlp: int = 5632, seed: int = 0) -> tuple[nn.Module, tuple]:
    layer = randomize(LlamaLayer(hidden, heads, kv_heads, mlp), seed)
    return LlamaPrefill(layer, seq).eval(), (torch.zeros(batch, seq, hidden),)


def llama_layer_decode(batch: int = 1, past: int = 128, hidden: int = 2048, heads: int = 32, kv_heads: int = 4,
                       mlp: int = 5632, seed: int = 0) -> tuple[nn.Module, tuple]:
    """The decode step of the same layer as ``llama_layer_prefill`` (the same seed, the same weights)."""
    layer = randomize(LlamaLayer(hidden, heads, kv_heads, mlp), seed)
    cache = torch.zeros(batch, kv_heads, past, hidden // heads)
    return LlamaDecode(layer, past).eval(), (torch.zeros(batch, 1, hidden), cache, cache.clone())
