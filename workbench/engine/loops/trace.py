"""Schedules as traces, the form MetaSchedule's tuning records hold: a trace as JSON data, a
schedule rebuilt from one, and the trace of a schedule that changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tvm import s_tir, tirx

from ..base.errors import LoopError
from .apply import tvm_reason
from .nest import FuncOrSchedule, list_blocks, new_schedule

__all__ = ["apply_trace_json", "empty_schedule", "trace_json"]


def _plain(obj: Any) -> Any:
    """TVM scalars and containers as plain Python, so the trace can go into a JSON file."""
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, (tirx.IntImm, tirx.FloatImm)):
        return obj.value
    if isinstance(obj, Mapping):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, Iterable):
        return [_plain(x) for x in obj]
    return str(obj)


def trace_json(sch: s_tir.Schedule) -> Any:
    """The schedule's trace as JSON data.

    Parameters
    ----------
    sch : tvm.s_tir.Schedule

    Returns
    -------
    list
        ``sch.trace.as_json()`` with TVM's integers, strings and arrays as plain Python, so
        ``json.dumps`` takes it; ``apply_trace_json`` replays it.
    """
    return _plain(sch.trace.as_json())


def apply_trace_json(func_or_sch: FuncOrSchedule, trace: Any) -> s_tir.Schedule:
    """Rebuild a schedule of ``func_or_sch`` from a saved trace (ours or a MetaSchedule record's).

    Parameters
    ----------
    func_or_sch : PrimFunc, IRModule or Schedule
        Left unchanged.
    trace : list
        From ``trace_json``, ``Trace.as_json()`` or a tuning record.

    Returns
    -------
    tvm.s_tir.Schedule

    Raises
    ------
    LoopError
        When the trace does not apply to this function.
    """
    sch = new_schedule(func_or_sch)
    try:
        s_tir.schedule.Trace.apply_json_to_schedule(trace, sch)
    except Exception as e:  # noqa: BLE001
        raise LoopError(f"the saved trace does not apply to this kernel: {tvm_reason(e)}") from None
    return sch


def empty_schedule(func_or_sch: FuncOrSchedule) -> s_tir.Schedule:
    """A schedule that changes nothing, its trace one block lookup (MetaSchedule's
    ``query_schedule`` skips records whose trace has no instruction at all)."""
    sch = new_schedule(func_or_sch)
    sch.get_sblock(list_blocks(sch)[0])
    return sch
