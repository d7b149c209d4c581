"""Layout propagation (ALT Algorithm 1) and the storage plan it yields.

Input: the graph and the requested layouts (a ``LayoutBook``; a key is a tensor name, or
``"T@op"`` for the layout a complex op wants for its input ``T``). Output: a ``Plan`` that says
in which layout every buffer is stored, which buffer each op reads, which conversions were
inserted and why, how ops fuse into kernels, and a report of where each layout came from.

Rules (the paper's, made concrete):
1. A layout requested on a tensor is the layout its producer writes, except that a complex
   op does not write a data-changing (advanced) layout: a conversion after it does. A graph
   input in a non-identity layout is converted by a kernel; constants are converted ahead of time.
2. Across element-wise ops a non-advanced layout is copied forward onto the output (same
   shape), unless the next consumer is complex: then the element-wise op writes the default
   layout itself and propagation stops there (the simple op does the conversion).
   With several laid-out inputs the first input's layout wins; a layout requested on an
   element-wise op's output is pushed back onto element-wise producers of its inputs.
3. A complex op's own wish for an input (``T@op``) is met by the producer when it is a simple
   op and ``T`` has no layout of its own (the pad writes the conv's unfolded input); otherwise
   a conversion op is inserted on that edge (two consecutive convs get one between them).
4. Kernels: a complex op fuses with the chain of element-wise ops that follow it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from .graph import Graph, Node
from .layout import Layout, LayoutBook
from .ops import names_for

__all__ = ["Buffer", "Conversion", "Origin", "Kernel", "Plan", "plan_layouts", "base_layout"]


@dataclass(frozen=True, slots=True)
class Buffer:
    name: str
    tensor: str
    layout: Layout
    source: str  # "input" | "const" | "op" | "conversion"


@dataclass(frozen=True, slots=True)
class Conversion:
    src: str  # buffer read
    dst: str  # buffer written
    tensor: str
    reason: str


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a tensor's layout came from, for the report the UI draws."""

    tensor: str
    layout: str
    how: str  # "default" | "requested" | "propagated" | "pushed back" | "written for consumer" | "stop"
    source: str = ""
    note: str = ""


@dataclass(frozen=True, slots=True)
class Kernel:
    """One PrimFunc of the program: a fused group of ops, or one conversion."""

    name: str
    ops: tuple[str, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    conversion: Conversion | None = None

    @property
    def head(self) -> str:
        return self.ops[0] if self.ops else self.name


@dataclass(frozen=True)
class Plan:
    graph: Graph
    book: LayoutBook
    buffers: dict[str, Buffer]
    reads: dict[tuple[str, str], str]  # (op, tensor) -> buffer
    writes: dict[str, str]  # op -> buffer
    conversions: tuple[Conversion, ...]
    outputs: dict[str, str]  # graph output tensor -> buffer in its original layout
    origins: dict[str, Origin]
    kernels: tuple[Kernel, ...] = field(default=())

    def layout_of(self, tensor: str) -> Layout:
        """The layout the tensor's producer (or input/constant) stores it in."""
        return self.buffers[self.book.storage(self.graph.tensor(tensor).name)].layout

    def report(self) -> list[dict]:
        """One row per tensor and conversion, for tables."""
        rows = [{"tensor": o.tensor, "layout": o.layout, "how": o.how, "from": o.source, "note": o.note}
                for o in self.origins.values()]
        rows += [{"tensor": c.tensor, "layout": self.buffers[c.dst].layout.label, "how": "conversion",
                  "from": c.src, "note": c.reason} for c in self.conversions]
        return rows


def base_layout(graph: Graph, tensor: str) -> Layout:
    t = graph.tensor(tensor)
    return Layout.identity(t.shape, names_for(t.dims, len(t.shape)))


def _requested(graph: Graph, book: LayoutBook) -> dict[str, tuple[Layout, Origin]]:
    """Rules 1-2: requested layouts, pushed back and propagated across element-wise ops."""
    got = {t: (lay, Origin(t, lay.label, "requested")) for t, lay in book.layouts
           if "@" not in t and t in graph.tensors}
    shape = lambda t: graph.tensors[t].shape  # noqa: E731
    for node in reversed(graph.nodes):  # push back from a laid-out element-wise output
        lay = got.get(node.name, (None,))[0]
        if node.kind != "elementwise" or lay is None or lay.advanced:
            continue
        for i in node.inputs:
            p = graph.producer(i)
            if p and p.kind == "elementwise" and i not in got and shape(i) == shape(node.name):
                got[i] = (lay, Origin(i, lay.label, "pushed back", node.name,
                                      f"{node.name} was laid out first; its element-wise input follows"))
    for node in graph.nodes:  # forward across element-wise ops
        if node.kind != "elementwise" or node.name in got:
            continue
        cands = [i for i in node.inputs if i in got and not got[i][0].advanced and shape(i) == shape(node.name)]
        if not cands:
            continue
        nxt = [c.name for c in graph.consumers(node.name) if c.kind == "complex"]
        src = cands[0]
        if nxt:
            got.setdefault(f"stop:{node.name}", (None, Origin(
                node.name, "", "stop", src, f"next op {nxt[0]} is complex: {node.name} converts from "
                                            f"{got[src][0].label} while computing")))
            continue
        note = f"copied from {src} across element-wise {node.name}"
        if len(cands) > 1:
            note += f" (first of the laid-out inputs {', '.join(cands)})"
        got[node.name] = (got[src][0], Origin(node.name, got[src][0].label, "propagated", src, note))
    return got


def plan_layouts(graph: Graph, book: LayoutBook) -> Plan:
    """Run propagation and decide every buffer's layout, the conversions and the kernels."""
    got = _requested(graph, book)
    stops = {k[5:]: v[1] for k, v in got.items() if k.startswith("stop:")}
    buffers: dict[str, Buffer] = {}
    conversions: list[Conversion] = []
    current: dict[str, str] = {}  # tensor -> buffer its consumers read by default
    origins: dict[str, Origin] = {}

    def convert(src: str, dst: str, tensor: str, layout: Layout, reason: str) -> str:
        buffers[dst] = Buffer(dst, tensor, layout, "conversion")
        conversions.append(Conversion(src, dst, tensor, reason))
        return dst

    for t in graph.tensors.values():
        lay, origin = got.get(t.name, (base_layout(graph, t.name), Origin(t.name, "", "default")))
        origin = origin if t.name in got else stops.get(t.name, origin)
        origins[t.name] = replace(origin, layout=lay.label)
        prod = graph.producer(t.name)
        if book.attachment(t.name):
            continue  # stored inside its host's buffer (store_at)
        if t.role == "input" and not lay.is_identity:
            buffers[t.name] = Buffer(t.name, t.name, base_layout(graph, t.name), "input")
            current[t.name] = convert(t.name, f"{t.name}@stored", t.name, lay,
                                      "graph input arrives in its original layout")
        elif prod is not None and prod.kind == "complex" and lay.advanced:
            buffers[t.name] = Buffer(t.name, t.name, base_layout(graph, t.name), "op")
            current[t.name] = convert(t.name, f"{t.name}@stored", t.name, lay,
                                      f"{prod.name} is complex and does not write a layout that "
                                      f"changes data ({', '.join(p.name for p in lay.prims)})")
        else:
            buffers[t.name] = Buffer(t.name, t.name, lay, t.role)
            current[t.name] = t.name

    for att in book.attachments:
        if att.tensor in graph.tensors:
            current[att.tensor] = current[att.host]
            origins[att.tensor] = Origin(att.tensor, f"in {att.host}", "requested", att.host,
                                         f"stored at dim {att.dim} of {att.host} (store_at)")
    reads: dict[tuple[str, str], str] = {}
    for node in graph.nodes:
        for t in node.inputs:
            want = book.get(f"{t}@{node.name}") if node.kind == "complex" else None
            have = buffers[current[t]].layout
            if want is None or want == have:
                reads[(node.name, t)] = current[t]
                continue
            prod = graph.producer(t)
            # The producer writes the wish of ONE consumer; a second complex consumer wanting
            # another layout gets a conversion (before, it overwrote the first wish silently).
            if (prod is not None and prod.kind != "complex" and t not in got and current[t] == t
                    and origins[t].how != "written for consumer"):
                buffers[t] = Buffer(t, t, want, "op")
                origins[t] = Origin(t, want.label, "written for consumer", node.name,
                                    f"{prod.name} is a simple op: it writes {node.name}'s input layout itself")
                reads[(node.name, t)] = t
            elif graph.tensors[t].role == "const":
                dst = f"{t}@{node.name}"
                buffers[dst] = Buffer(dst, t, want, "const")
                reads[(node.name, t)] = dst
            else:
                why = (f"{prod.name} and {node.name} are both complex: tuned independently"
                       if prod is not None and prod.kind == "complex"
                       else f"{t} already has layout {have.label}")
                reads[(node.name, t)] = convert(current[t], f"{t}@{node.name}", t, want, why)

    writes = {n.name: n.name for n in graph.nodes}
    outputs = {}
    for t in graph.outputs:
        b = current[t]
        outputs[t] = b if buffers[b].layout.is_identity else convert(
            b, f"{t}@out", t, base_layout(graph, t), "graph outputs come back in their original layout")
    plan = Plan(graph, book, buffers, reads, writes, tuple(conversions), outputs, origins)
    return Plan(graph, book, buffers, reads, writes, tuple(conversions), outputs, origins, _kernels(plan))


def _kernels(plan: Plan) -> tuple[Kernel, ...]:
    """Rule 4, in execution order, with each conversion right before its first reader."""
    g = plan.graph
    order = {n.name: k for k, n in enumerate(g.nodes)}
    by_dst = {c.dst: c for c in plan.conversions}
    out: list[Kernel] = []
    emitted: set[str] = set()

    def need(buf: str) -> None:
        conv = by_dst.get(buf)
        if conv and buf not in emitted:
            need(conv.src)
            emitted.add(buf)
            out.append(Kernel(_ident(f"convert_{buf}"), (), (conv.src,), (buf,), conv))

    taken: set[str] = set()
    for node in g.nodes:
        if node.name in taken:
            continue
        chain = _chain(g, plan, node, order)
        taken.update(n.name for n in chain)
        ins, written = [], {plan.writes[n.name] for n in chain}
        for n in chain:
            for t in n.inputs:
                b = plan.reads[(n.name, t)]
                need(b)
                if b not in written and b not in ins:
                    ins.append(b)
        outs = [plan.writes[n.name] for n in chain
                if n is chain[-1] or n.name in g.outputs
                or any(c not in chain for c in g.consumers(n.name))]
        out.append(Kernel(_ident(node.name), tuple(n.name for n in chain), tuple(ins), tuple(outs)))
    for buf in plan.outputs.values():
        need(buf)
    return tuple(out)


def _chain(g: Graph, plan: Plan, head: Node, order: dict[str, int]) -> list[Node]:
    chain = [head]
    if head.kind != "complex":
        return chain
    cur = head
    while True:
        cons = g.consumers(cur.name)
        if len(cons) != 1 or cur.name in g.outputs:
            return chain
        c = cons[0]
        ready = all(plan.reads[(c.name, t)] == plan.writes[cur.name] if t == cur.name
                    else (g.producer(t) is None or order[g.producer(t).name] < order[head.name])
                    and plan.buffers[plan.reads[(c.name, t)]].source != "conversion" for t in c.inputs)
        if c.kind != "elementwise" or not ready:
            return chain
        chain.append(c)
        cur = c


def _ident(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in name)
