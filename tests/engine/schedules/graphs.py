"""Graphs shared by the expert-schedule tests and the conversions' tests: small graphs whose
layouts make conversion kernels, and single convs of any rank."""

from workbench.engine.ir.graph import GraphBuilder

__all__ = ["LAYOUTS", "ODD", "alt_graph", "conv_graph", "conversion_kernels", "cv_graph", "depthwise_graph"]


def cv_graph(shape, out_channels=5):
    """data -> relu -> conv -> relu2: the input, the relu (its wish) and the output convert."""
    b = GraphBuilder("cv")
    x = b.input("data", shape)
    r = b.op("relu", "relu", x)
    y = b.op("conv", "conv2d", r, b.const("conv.weight", (out_channels, shape[1], 3, 3)), padding=1)
    b.op("relu2", "relu", y)
    return b.build()


ODD = (1, 7, 9, 11)  # no dim divides the lanes
LAYOUTS = {
    "split+reorder (blocked, padding)": [("split", {"dim": 1, "factors": [-1, 4]}), ("reorder", {"perm": [0, 1, 3, 4, 2]})],
    "reorder (channels last)": [("reorder", {"perm": [0, 2, 3, 1]})],
    "reorder (spatial transpose)": [("reorder", {"perm": [0, 1, 3, 2]})],
    "fuse then reorder": [("fuse", {"dims": [2, 3]}), ("reorder", {"perm": [0, 2, 1]})],
    "split W, inner last": [("split", {"dim": 3, "factors": [-1, 4]}), ("reorder", {"perm": [0, 1, 2, 3, 4]}),
                            ("reorder", {"perm": [0, 3, 1, 2, 4]})],
    "pad H and W": [("pad", {"dim": 2, "before": 1, "after": 2}), ("pad", {"dim": 3, "before": 1, "after": 1})],
    "pad then channels last": [("pad", {"dim": 3, "before": 1, "after": 1}), ("reorder", {"perm": [0, 2, 3, 1]})],
    "unfold with halos": [("unfold", {"dim": 2, "tile": 4, "stride": 3}), ("unfold", {"dim": 4, "tile": 5, "stride": 3})],
    "unfold + pad + blocked (ALT's input)": [("pad", {"dim": 3, "before": 1, "after": 1}),
                                            ("unfold", {"dim": 3, "tile": 6, "stride": 4}),
                                            ("split", {"dim": 1, "factors": [-1, 4]}),
                                            ("reorder", {"perm": [0, 1, 3, 4, 5, 2]})],
}


def conversion_kernels(prog):
    return [k for k in prog.plan.kernels if k.conversion]


def alt_graph(shape, out=8, k=3, stride=1, padding=1):
    """data -> conv: ALT's tiled layout on the conv converts its input (unfolded, with halos and
    padding) and its output, the graph's, back to NCHW (through the padded tiles when the tiles
    do not divide the output)."""
    b = GraphBuilder("alt")
    x = b.input("data", shape)
    b.op("conv", "conv2d", x, b.const("conv.weight", (out, shape[1], k, k)), stride=stride, padding=padding)
    return b.build()


def conv_graph(nd: int, cin: int, cout: int, size: int, k: int, epilogue: bool = False, **attrs):
    """One conv (``conv``) of rank ``nd`` on a (1, cin, size...) input, with bias + relu after it."""
    b = GraphBuilder(f"c{nd}d")
    x = b.input("data", (1, cin, *(size,) * nd), "NC" + "DHW"[3 - nd:])
    groups = attrs.get("groups", 1)
    y = b.op("conv", f"conv{nd}d", x, b.const("conv.weight", (cout, cin // groups, *(k,) * nd), "OI" + "DHW"[3 - nd:]),
             **attrs)
    if epilogue:
        y = b.op("bias", "bias_add", y, b.const("bias.bias", (cout,), "C"), axis=1)
        b.op("relu", "relu", y)
    return b.build(), "conv"


def depthwise_graph(size: int, stride: int = 1):
    return conv_graph(2, 16, 16, size, 3, padding=1, groups=16, depthwise=True, stride=stride)
