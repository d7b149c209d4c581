"""Loop primitives on a kernel's PrimFunc, through ``tvm.s_tir.Schedule``, as replayable steps: the
names the rest of the workbench imports, gathered from the modules that hold them.

A step is a ``Step`` of kind ``loop`` (``loop_step``): a primitive named as TVM names it
(``split``, ``fuse``, ...) with its arguments (``specs``). Blocks and loops are addressed by the
names ``nest`` reads; ``apply`` applies steps (each checked by ``checks``) to a copy, bad
arguments and TVM's refusals raising ``LoopError`` naming the step and the reason; ``trace``
turns schedules into MetaSchedule's traces and back; ``basic`` proposes a first schedule.
"""

from __future__ import annotations

from .apply import apply_step, apply_steps
from .basic import basic_schedule
from .nest import LoopInfo, block_nest, block_writes, diff, list_blocks, list_loops, script, visit_nodes, walk_nest
from .specs import PRIMITIVES, loop_step
from .trace import apply_trace_json, empty_schedule, trace_json

__all__ = ["visit_nodes", "loop_step", "LoopInfo", "PRIMITIVES", "list_blocks", "list_loops", "block_nest",
           "block_writes", "apply_step", "apply_steps", "script", "diff", "trace_json", "apply_trace_json",
           "empty_schedule", "walk_nest", "basic_schedule"]
