"""Layout propagation (ALT Algorithm 1) and the storage plan it yields.

Input: the graph and the requested layouts (a ``LayoutBook``; a key is a tensor name, or
``"T@op"`` for the layout a complex op wants for its input ``T``). Output: a ``Plan`` that says
in which layout every buffer is stored, which buffer each op reads, which conversions were
inserted and why, how ops fuse into kernels, and a report of where each layout came from.
The rules that decide all this are ``plan_layouts``'s.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field, replace

import tvm

from ..ir.graph import Graph, Node
from .book import LayoutBook
from .primitives import Layout
from ..ir.ops import names_for

__all__ = ["Buffer", "Conversion", "Origin", "Kernel", "Plan", "plan_layouts", "base_layout", "same_storage"]


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
    #: True when the kernel of op ``into`` writes ``dst`` itself (no kernel of its own)
    fused: bool = False
    into: str = ""


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
    """One PrimFunc of the program: a fused group of ops (with the conversions fused into it,
    ``fused``, each written right after its source), or one stand-alone conversion."""

    name: str
    ops: tuple[str, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    conversion: Conversion | None = None
    fused: tuple[Conversion, ...] = ()

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
                  "from": c.src, "note": c.reason + (f"; fused: {c.into} writes it directly" if c.fused else ""),
                  "fused": c.fused} for c in self.conversions]
        return rows


def base_layout(graph: Graph, tensor: str) -> Layout:
    t = graph.tensor(tensor)
    return Layout.identity(t.shape, names_for(t.dims, len(t.shape)))


########## Rule 5: layouts that store alike ##########

def _ravel(idx: list, shape: tuple[int, ...]):
    flat = 0
    for i, n in zip(idx, shape):
        flat = flat * n + i
    return flat


def _unravel(flat, shape: tuple[int, ...]) -> list:
    out = []
    for n in reversed(shape):
        out.append(flat % n if n > 1 else tvm.tirx.const(0, "int64"))
        flat = flat // n
    return out[::-1]


@functools.lru_cache(maxsize=4096)
def same_storage(a: Layout, b: Layout) -> bool:
    """True when ``a`` and ``b`` store a tensor identically: the same number of stored
    elements, and every stored position (row-major) holds the same logical element, or padding
    in both. Proved symbolically over ``a``'s stored indices; what cannot be proved counts as
    different (a conversion too many, never a wrong result).

    >>> nchw = Layout.identity((1, 64, 8, 8), "NCHW")
    >>> same_storage(nchw, nchw.apply("split", dim=1, factors=[1, 64]))
    True
    >>> same_storage(nchw, nchw.apply("reorder", perm=[0, 2, 3, 1]))
    False
    """
    if a.prims == b.prims:
        return a.logical == b.logical
    if a.logical != b.logical or math.prod(a.shape) != math.prod(b.shape):
        return False
    from tvm.sym.analyzer import Analyzer

    ana = Analyzer()
    stored = [tvm.tirx.Var(f"s{k}", "int64") for k in range(len(a.shape))]
    for v, n in zip(stored, a.shape):
        ana.bind(v, tvm.ir.Range(tvm.tirx.const(0, "int64"), tvm.tirx.const(n, "int64")))
    try:
        la, ca = a.inverse(list(stored))
        lb, cb = b.inverse(_unravel(_ravel(stored, a.shape), b.shape))
        true = tvm.tirx.const(True, "bool")
        va, vb = (tvm.tirx.all(*c) if c else true for c in (ca, cb))
        if (ca or cb) and not ana.can_prove(va == vb):
            return False
        return all(ana.can_prove_equal(x, y) or ((ca or cb) and ana.can_prove(tvm.tirx.Or(tvm.tirx.Not(va), x == y)))
                   for x, y in zip(la, lb))
    except (tvm.TVMError, TypeError, ValueError):  # an expression the analyzer cannot take: not proved
        return False


#: kinds of op whose TE definition can write any layout (an opaque op's TIR writes the default one)
_WRITES_ANY = ("elementwise", "other")


def _join(*notes: str) -> str:
    return "; ".join(n for n in notes if n)


########## Rules 1-2: requested and propagated layouts ##########

def _requested(graph: Graph, book: LayoutBook) -> tuple[dict[str, tuple[Layout, Origin]], dict[str, Origin]]:
    """Rules 1-2: requested layouts, pushed back and propagated across element-wise ops; and
    the report's notes on the element-wise ops where propagation stopped."""
    got = {t: (lay, Origin(t, lay.label, "requested")) for t, lay in book.layouts
           if "@" not in t and t in graph.tensors}
    notes: dict[str, Origin] = {}
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
            notes.setdefault(node.name, Origin(node.name, "", "stop", src, f"next op {nxt[0]} is complex: {node.name} "
                                                                           f"converts from {got[src][0].label} while computing"))
            continue
        note = f"copied from {src} across element-wise {node.name}"
        if len(cands) > 1:
            note += f" (first of the laid-out inputs {', '.join(cands)})"
        got[node.name] = (got[src][0], Origin(node.name, got[src][0].label, "propagated", src, note))
    return got, notes


def plan_layouts(graph: Graph, book: LayoutBook, fuse: bool = True) -> Plan:
    """Run propagation and decide every buffer's layout, the conversions and the kernels.

    ``fuse=False`` leaves every conversion a kernel of its own (rule 6 off), for comparison.

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
    4. Kernels: a complex op fuses with the chain of element-wise ops that follow it; the chain
       goes on across a converted buffer when the conversion can run in the kernel (rule 6).
    5. A layout that stores a tensor exactly as another one does (same stored size, every stored
       position holding the same element: an identity reorder, a split by the full extent, a fuse
       of dims...) is that layout as far as storage goes (``same_storage``): no conversion is
       made between the two. The tensor's ops keep the loops of the layout asked for, but a graph
       input whose layout stores like the original stays in it, and so does a graph output of the
       same shape (one of another shape, e.g. split alone, is copied back into the original shape).
    6. ALT's fused conversions (paper section 5): a conversion whose source is written by a simple
       op (an element-wise op, possibly a complex op's epilogue, or another simple op) runs in that
       op's kernel, which writes the consumer's layout directly; so does one whose converted buffer
       the complex op's element-wise epilogue reads (the chain continues across it). A conversion
       between two complex ops, of a graph input, or back to a graph output's original layout
       stays a kernel of its own (``Conversion.fused``).
    7. An opaque op (TVM's TIR for an op the library does not model, ``ir.opaque``) is a kernel
       of its own that reads and writes the default layout: propagation stops at it, a conversion
       is inserted on each edge whose buffer is stored otherwise, and nothing is fused into it.
    """
    got, notes = _requested(graph, book)
    buffers: dict[str, Buffer] = {}
    conversions: list[Conversion] = []
    current: dict[str, str] = {}  # tensor -> buffer its consumers read by default
    origins: dict[str, Origin] = {}

    def convert(src: str, dst: str, tensor: str, layout: Layout, reason: str) -> str:
        buffers[dst] = Buffer(dst, tensor, layout, "conversion")
        conversions.append(Conversion(src, dst, tensor, reason))
        return dst

    for t in graph.tensors.values():
        base = base_layout(graph, t.name)
        lay, origin = got.get(t.name, (base, Origin(t.name, "", "default")))
        origin = origin if t.name in got else notes.get(t.name, origin)
        origins[t.name] = replace(origin, layout=lay.label)
        alike = t.name in got and same_storage(lay, base)
        if alike and (t.role == "input" or (t.name in graph.outputs and lay.shape == base.shape)):
            # Rule 5: the caller hands over / reads back the original layout, which this one
            # stores alike: keep it (the tensor's own ops keep their loops everywhere else). An
            # output whose shape differs keeps its layout: the caller gets the buffer as stored,
            # so a copy into the original shape remains (``Built.run`` hands buffers over as is).
            lay = base
            origins[t.name] = replace(origins[t.name], note=_join(
                origins[t.name].note, f"stores exactly as {base.label}: the graph "
                                      f"{'input' if t.role == 'input' else 'output'} stays in it, nothing to convert"))
        prod = graph.producer(t.name)
        if book.attachment(t.name):
            continue  # stored inside its host's buffer (store_at)
        if t.role == "input" and not lay.is_identity:
            buffers[t.name] = Buffer(t.name, t.name, base, "input")
            current[t.name] = convert(t.name, f"{t.name}@stored", t.name, lay,
                                      "graph input arrives in its original layout")
        elif prod is not None and prod.kind == "complex" and lay.advanced and not alike:
            buffers[t.name] = Buffer(t.name, t.name, base, "op")
            current[t.name] = convert(t.name, f"{t.name}@stored", t.name, lay,
                                      f"{prod.name} is complex and does not write a layout that "
                                      f"changes data ({', '.join(p.primitive for p in lay.prims)})")
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
        opaque = node.kind == "opaque"
        for t in node.inputs:
            have = buffers[current[t]].layout
            if opaque:  # TVM's TIR reads the default layout, in the tensor's own shape
                base = base_layout(graph, t)
                want = None if have.shape == base.shape and same_storage(have, base) else base
            else:
                want = book.get(f"{t}@{node.name}") if node.kind == "complex" else None
            if want is None or (not opaque and same_storage(want, have)):
                reads[(node.name, t)] = current[t]
                continue
            prod = graph.producer(t)
            # The producer writes the wish of ONE consumer; a second complex consumer wanting
            # another layout gets a conversion (before, it overwrote the first wish silently).
            if (prod is not None and prod.kind in _WRITES_ANY and t not in got and current[t] == t
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
                why = (f"{node.name} is an opaque kernel: it reads the default layout" if opaque
                       else f"{prod.name} and {node.name} are both complex: tuned independently"
                       if prod is not None and prod.kind == "complex"
                       else f"{prod.name} is an opaque kernel: it writes the default layout only"
                       if prod is not None and prod.kind == "opaque"
                       else f"{t} already has layout {have.label}")
                reads[(node.name, t)] = convert(current[t], f"{t}@{node.name}", t, want, why)

    writes = {n.name: n.name for n in graph.nodes}
    outputs = {}
    for t in graph.outputs:
        b = current[t]
        base = base_layout(graph, t)
        outputs[t] = b if buffers[b].layout.is_identity else convert(
            b, f"{t}@out", t, base, "graph outputs come back in their original shape (a copy: the layout stores "
                                    "alike)" if same_storage(buffers[b].layout, base) else
                                    "graph outputs come back in their original layout")
    if fuse:
        conversions = _fuse(graph, buffers, reads, conversions, outputs)
    plan = Plan(graph, book, buffers, reads, writes, tuple(conversions), outputs, origins)
    return Plan(graph, book, buffers, reads, writes, tuple(conversions), outputs, origins, _kernels(plan))


########## Rule 6: fused conversions ##########

def _fuse(graph: Graph, buffers: dict[str, Buffer], reads: dict[tuple[str, str], str],
          conversions: list[Conversion], outputs: dict[str, str]) -> list[Conversion]:
    """Mark the conversions that run in their source's producer kernel (rule 6)."""
    out_bufs = set(outputs.values())
    marked = []
    for c in conversions:
        prod = graph.producer(c.tensor)
        fused = (prod is not None and c.src == prod.name and buffers[c.src].source == "op"
                 and c.dst not in out_bufs  # the caller reads outputs: a kernel of their own (see module doc)
                 and (prod.kind in _WRITES_ANY
                      or prod.kind == "complex" and _epilogue_reads(graph, reads, prod, c.dst)))
        marked.append(replace(c, fused=True, into=prod.name) if fused else c)
    return marked


def _epilogue_reads(graph: Graph, reads: dict[tuple[str, str], str], op: Node, buf: str) -> bool:
    """True when the only reader of complex ``op``'s converted output ``buf`` is its element-wise
    epilogue (the single consumer its chain continues with)."""
    cons = graph.consumers(op.name)
    return (len(cons) == 1 and cons[0].kind == "elementwise" and op.name not in graph.outputs
            and reads[(cons[0].name, op.name)] == buf)


########## Rule 4: kernels ##########

def _kernels(plan: Plan) -> tuple[Kernel, ...]:
    """Rule 4, in execution order, with each stand-alone conversion right before its first
    reader and each fused one in the kernel of the op it is fused into."""
    g = plan.graph
    order = {n.name: k for k, n in enumerate(g.nodes)}
    by_dst = {c.dst: c for c in plan.conversions}
    out: list[Kernel] = []
    emitted: set[str] = set()

    def need(buf: str) -> None:
        conv = by_dst.get(buf)
        if conv and not conv.fused and buf not in emitted:
            need(conv.src)
            emitted.add(buf)
            out.append(Kernel(_ident(f"convert_{buf}"), (), (conv.src,), (buf,), conv))

    chains: list[list[Node]] = []
    taken: set[str] = set()
    for node in g.nodes:
        if node.name not in taken:
            chains.append(_chain(g, plan, node, order))
            taken.update(n.name for n in chains[-1])
    kernel_of = {n.name: k for k, chain in enumerate(chains) for n in chain}
    # who reads each buffer from outside the kernel that writes it
    readers: dict[str, set[int | str]] = {}
    for (op, _), b in plan.reads.items():
        readers.setdefault(b, set()).add(kernel_of[op])
    for c in plan.conversions:
        readers.setdefault(c.src, set()).add(kernel_of[c.into] if c.fused else c.dst)
    for b in plan.outputs.values():
        readers.setdefault(b, set()).add("caller")

    for k, chain in enumerate(chains):
        names = {n.name for n in chain}
        fused = [c for c in plan.conversions if c.fused and c.into in names]
        written = [b for n in chain for b in [plan.writes[n.name]] + [c.dst for c in fused if c.into == n.name]]
        ins: list[str] = []
        for n in chain:
            for t in n.inputs:
                b = plan.reads[(n.name, t)]
                need(b)
                if b not in written and b not in ins:
                    ins.append(b)
        outs = [b for b in written if readers.get(b, set()) - {k}] or [written[-1]]
        out.append(Kernel(_ident(chain[0].name), tuple(n.name for n in chain), tuple(ins), tuple(outs),
                          fused=tuple(fused)))
    for buf in plan.outputs.values():
        need(buf)
    return tuple(out)


def _chain(g: Graph, plan: Plan, head: Node, order: dict[str, int]) -> list[Node]:
    """The head and the element-wise ops that fuse after it: each the single consumer of the
    previous one, reading it as written there (or through a conversion fused there), with
    every other input ready before the head runs."""
    by_dst = {c.dst: c for c in plan.conversions}

    def before_head(buf: str) -> bool:
        conv = by_dst.get(buf)
        if conv is not None:  # fused: its op's kernel; stand-alone: emitted right before
            return before_head(conv.src) if not conv.fused else order[conv.into] < order[head.name]
        p = g.producer(plan.buffers[buf].tensor)
        return p is None or order[p.name] < order[head.name]

    chain = [head]
    if head.kind != "complex":
        return chain
    cur = head
    while True:
        cons = g.consumers(cur.name)
        if len(cons) != 1 or cur.name in g.outputs:
            return chain
        c = cons[0]
        own = plan.reads[(c.name, cur.name)]
        via = by_dst.get(own)
        ready = (own == plan.writes[cur.name] or (via is not None and via.fused and via.into == cur.name)) and all(
            before_head(plan.reads[(c.name, t)]) for t in c.inputs if t != cur.name)
        if c.kind != "elementwise" or not ready:
            return chain
        chain.append(c)
        cur = c


def _ident(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in name)
