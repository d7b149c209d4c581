"""AppTest tests of the Loops page's forms and views: every primitive starts from arguments that
apply, the loop nest and table follow an applied primitive, TVM's refusals are shown and change
nothing, previews, assembly, a conversion's analytic schedule and a measured variant's name."""

from __future__ import annotations

import json

import pytest

from tests.app.apptest import preset_form, session


def test_the_default_loop_split_applies_to_every_loop(at):
    """The factors' default divides the chosen loop's extent, whichever loop it is."""
    at.switch_page("../pages/loops.py").run()
    at.selectbox(key="loop_kernel").set_value("conv").run()
    at.selectbox(key="loop_prim").set_value("split").run()
    at.selectbox(key="la_split_block").set_value("conv").run()
    for loop in at.selectbox(key="la_split_loop").options[:4]:
        at.selectbox(key="la_split_loop").set_value(loop).run()
        text = next(t.value for t in at.text_input if t.key.startswith("la_split_factors"))
        extent = int(at.text_input[-1].label.rsplit("extent ", 1)[1].rstrip(")"))
        assert text == f"-1, {max(f for f in range(1, 17) if extent % f == 0)}"
    at.button(key="apply_loop").click().run()
    assert not at.error, [e.value for e in at.error]
    assert session(at).steps[-1].primitive == "split"


def test_every_loop_primitive_starts_from_arguments_that_apply(at):
    """Each primitive's form starts from a block and loops TVM accepts on the kernel (reorder and
    fuse with two loops, compute_at under another block): no refusal before the user types."""
    at.switch_page("../pages/loops.py").run()
    at.selectbox(key="loop_kernel").set_value("conv").run()
    for prim in at.selectbox(key="loop_prim").options:
        name = prim.split(":", 1)[0]
        at.selectbox(key="loop_prim").set_value(name).run()
        refusals = [w.value for w in at.warning if "would be refused" in w.value]
        assert not refusals and not at.button(key="apply_loop").disabled, (name, refusals)
    assert session(at).steps == ()


def test_transform_layout_names_the_written_buffers_and_its_defaults_apply(at):
    """``write_index`` picks among the block's written buffers by name; transform_layout's
    factors default to one 1 per dim of the chosen buffer and its perm to the identity (an
    action that always applies, here to a cache_write's tile); a split factor adds a dim to the
    perm's default."""
    at.switch_page("../pages/loops.py").run()
    at.selectbox(key="loop_kernel").set_value("conv").run()
    at.selectbox(key="loop_prim").set_value("cache_write").run()
    at.selectbox(key="la_cache_write_block").set_value("conv").run()
    assert at.selectbox(key="la_cache_write_write_index").options[0].startswith("0 (conv, shape [")
    at.button(key="apply_loop").click().run()
    assert not at.error, [e.value for e in at.error]
    at.selectbox(key="loop_prim").set_value("transform_layout").run()
    at.selectbox(key="la_transform_layout_block").set_value("conv").run()
    written = at.selectbox(key="la_transform_layout_write_index").options[0]
    shape = json.loads(written.split("shape ", 1)[1].rstrip(")"))
    assert written.startswith("0 (conv_")  # the tile cache_write allocated, not the kernel's output
    factors = next(t for t in at.text_input if t.key.startswith("la_transform_layout_factors"))
    perm = next(t for t in at.text_input if t.key.startswith("la_transform_layout_perm"))
    assert factors.value == ", ".join("1" for _ in shape) and perm.value == ", ".join(map(str, range(len(shape))))
    at.button(key="apply_loop").click().run()
    assert not at.error, [e.value for e in at.error]
    assert session(at).steps[-1].primitive == "transform_layout"
    d = next(i for i, n in enumerate(shape) if n % 2 == 0)
    factors.input(", ".join("2" if i == d else "1" for i in range(len(shape)))).run()
    perm = next(t for t in at.text_input if t.key.startswith("la_transform_layout_perm"))
    assert perm.value == ", ".join(map(str, range(len(shape) + 1)))


def test_a_loop_primitive_updates_the_loop_nest(at):
    at.switch_page("../pages/loops.py").run()
    at.selectbox(key="loop_kernel").set_value("conv").run()
    before = _side_by_side(at)
    assert before[0] == before[1] and "T.parallel" not in before[1]
    at.selectbox(key="loop_prim").set_value("parallel").run()
    at.selectbox(key="la_parallel_block").set_value("conv").run()
    loop = at.selectbox(key="la_parallel_loop").options[0]
    at.selectbox(key="la_parallel_loop").set_value(loop).run()
    at.button(key="apply_loop").click().run()
    assert not at.error, [e.value for e in at.error]
    assert session(at).steps[-1].primitive == "parallel"
    left, right = _side_by_side(at)
    assert "T.parallel" in right and "T.parallel" not in left
    assert left == before[0]  # the "before" side shows the nest before the primitive


def _side_by_side(at) -> tuple[str, str]:
    """The text of the left and right columns of the side-by-side nests (one HTML table), blank
    lines left out (the diff aligns the sides with empty cells)."""
    import html
    import re

    body = next(h.proto.body for h in at.get("html") if "nest-pair" in h.proto.body)
    body = body.split("<div class='nest nest-one'>")[0]  # the wide table (the stacked nests follow it)
    rows = re.findall(r"<tr>(.*?)</tr>", body, re.S)[1:]  # the header row aside
    cells = [re.findall(r"<td>(.*?)</td>", r, re.S) for r in rows]  # the code cells (line numbers have a class)
    text = lambda c: html.unescape(re.sub(r"<[^>]+>", "", c)).replace("\xa0", " ")  # noqa: E731
    side = lambda k: "\n".join(t for c in cells if c and (t := text(c[k])))  # noqa: E731 - the other side's gaps dropped
    return side(0), side(-1)


def test_the_loop_table_names_each_loop_after_its_layout_dim(at):
    """r18_stem's conv writes NCHW: its loops i0..i3 run over N, C, H, W, its reductions keep their names."""
    at.switch_page("../pages/loops.py").run()
    at.selectbox(key="loop_kernel").set_value("conv").run()
    table = next(d.value for d in at.dataframe if "layout dim" in d.value.columns)
    conv = table[table.block == "conv"]
    spatial = conv[~conv.reduction]
    assert list(spatial["layout dim"]) == ["N", "C", "H", "W"], conv
    assert all(conv[conv.reduction]["layout dim"] == conv[conv.reduction]["loop"]), conv


def test_a_loop_primitive_tvm_refuses_shows_its_reason_and_changes_nothing(at):
    at.switch_page("../pages/loops.py").run()
    at.selectbox(key="loop_kernel").set_value("conv").run()
    at.selectbox(key="loop_prim").set_value("compute_inline").run()
    at.selectbox(key="la_compute_inline_block").set_value("conv").run()
    # refused before Apply (the live check), in TVM's words, and Apply is disabled
    # (the page names the primitive; the session's "action 0 (loop on 'conv'): step 0:" context is left out)
    assert any(w.value.startswith("compute_inline would be refused: compute_inline(block='conv')") and
               "action 0" not in w.value for w in at.warning), [w.value for w in at.warning]
    assert at.button(key="apply_loop").disabled and session(at).steps == ()


def test_the_loops_page_previews_a_primitive_and_shows_the_kernels_assembly(at):
    at.switch_page("../pages/loops.py").run()
    at.selectbox(key="loop_kernel").set_value("conv").run()
    at.selectbox(key="loop_prim").set_value("parallel").run()
    at.selectbox(key="la_parallel_block").set_value("conv").run()
    at.radio(key="nest_view").set_value("preview of parallel").run()
    assert "+" in at.code[-1].value and "T.parallel" in at.code[-1].value and session(at).steps == ()
    at.button(key="apply_expert").click().run()
    at.radio(key="nest_view").set_value("assembly").run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    metrics = {m.label: m.value for m in at.metric}
    assert int(metrics["vector FMAs"]) > 0 and metrics["widest vector"] in ("256 bit", "512 bit"), metrics
    assert any("vfmadd" in c.value for c in at.code)  # the hot loop
    at.radio(key="nest_view").set_value("diff from default").run()
    assert "T.parallel" in at.code[-1].value and "+" in at.code[-1].value


def test_the_loops_page_lists_a_conversions_analytic_schedule(at):
    """A conversion kernel shows its analytic schedule's steps, folded away when there are many
    (a padded unfold's border copies each get steps of their own)."""
    preset_form(at)
    at.selectbox(key="preset_name").set_value("blocked").run()
    at.selectbox(key="layout_key").set_value("conv").run()
    at.button(key="apply_preset").click().run()
    at.switch_page("../pages/loops.py").run()
    conversions = [k for k in at.selectbox(key="loop_kernel").options if k.startswith("convert")]
    assert conversions
    at.selectbox(key="loop_kernel").set_value(conversions[0].split()[0]).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    (listing,) = [e for e in at.expander if e.label.endswith("loop steps")]
    count = int(listing.label.split()[1])
    steps = listing.code[0].value.splitlines()
    assert len(steps) == count > 0 and all("(block=" in s for s in steps)


def test_a_click_on_a_loop_table_row_fills_the_primitives_block_and_loop(at):
    """A selected row (what a click sets) puts its block and loop into the form: split asks for
    one loop, fuse collects the clicked loops of one block."""
    at.switch_page("../pages/loops.py").run()
    at.selectbox(key="loop_kernel").set_value("conv").run()
    table = next(d.value for d in at.dataframe if "layout dim" in d.value.columns)
    row = int(table.index[(table.block == "conv") & (table.loop == table[table.block == "conv"].loop.iloc[2])][0])
    at.selectbox(key="loop_prim").set_value("split").run()
    at.session_state["loop_table_conv_0"] = {"selection": {"rows": [row], "columns": []}}
    at.run()
    assert not at.exception, at.exception
    assert at.selectbox(key="la_split_block").value == "conv"
    assert at.selectbox(key="la_split_loop").value == table.loop[row]
    at.selectbox(key="loop_prim").set_value("fuse").run()
    for r in (row - 1, row):
        at.session_state["loop_table_conv_0"] = {"selection": {"rows": [r], "columns": []}}
        at.run()
    assert at.multiselect(key="la_fuse_loops").value == [table.loop[row - 1], table.loop[row]]  # outermost first
    assert not any(w.value.startswith("fuse would be refused") for w in at.warning), [w.value for w in at.warning]
    at.button(key="apply_loop").click().run()  # the clicked row is not left checked over the new loops
    assert session(at).steps[-1].primitive == "fuse" and at.session_state["loop_table_resets"] == 1
    assert "loop_table_conv_1" not in at.session_state or not at.session_state["loop_table_conv_1"]["selection"]["rows"]


@pytest.mark.slow
def test_a_measured_variant_is_named_after_its_whole_action_chain(at):
    preset_form(at)
    at.selectbox(key="preset_name").set_value("alt_tiled").run()
    at.button(key="apply_preset").click().run()
    at.switch_page("../pages/loops.py").run()
    at.button(key="measure").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    table = next(d.value for d in at.get("dataframe") if "action chain" in d.value.columns)
    steps = session(at).steps
    chain = table["action chain"].iloc[-1]
    assert len(steps) >= 1 and all(s.primitive in chain for s in steps), (chain, steps)
    assert table["variant"].iloc[-1] == "v1"  # short, for legends: the chain has a column of its own
