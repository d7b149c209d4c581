"""Reference networks of the ALT paper's end-to-end study, written with ``torch.nn``.

torchvision's models do not import next to the CPU torch wheel here, so ResNet-18 and
MobileNet-V2 are restated from their papers (and torchvision's layer order, so the graphs match
the usual ones), and a BERT-base encoder layer from the BERT paper. Weights are seeded random
values; batch norms get random running statistics as well, so folding them into the convs is
actually exercised. The zoo imports these through ``importer`` like any user model.

Every builder returns ``(module, example_inputs)``; the module is in eval mode.
"""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["ResNet18", "MobileNetV2", "BertLayer", "resnet18", "mobilenet_v2", "bert_layer", "randomize"]


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


########## Builders: (module, example inputs) ##########

def resnet18(batch: int = 1, image: int = 224, width: int = 64, seed: int = 0) -> tuple[nn.Module, tuple]:
    return randomize(ResNet18(width), seed), (torch.zeros(batch, 3, image, image),)


def mobilenet_v2(batch: int = 1, image: int = 224, seed: int = 0) -> tuple[nn.Module, tuple]:
    return randomize(MobileNetV2(), seed), (torch.zeros(batch, 3, image, image),)


def bert_layer(batch: int = 1, seq: int = 128, hidden: int = 768, heads: int = 12,
               seed: int = 0) -> tuple[nn.Module, tuple]:
    return randomize(BertLayer(hidden, heads, 4 * hidden), seed), (torch.zeros(batch, seq, hidden),)
