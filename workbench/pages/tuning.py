"""Tuning: run the joint (layout + loop) or loop-only stage in a worker process, watch the
curves live, stop it, and apply the result to the session as ``tuned`` actions."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pandas as pd
import streamlit as st

from workbench.engine.base.errors import TuneError, WorkbenchError
from workbench.engine.session.session import State
from workbench.engine.tuning.jobs.applied import Applied, before_state, kernel_changes, load_applied, record_applied
from workbench.engine.tuning.jobs.baselines import speedup_rows
from workbench.engine.tuning.options import TuneOptions
from workbench.engine.tuning.jobs.partial import partial_reason
from workbench.engine.tuning.progress import pace, summarize_progress
from workbench.engine.tuning.stages import joint_shares
from workbench.engine.tuning.rpc import RpcConfig
from workbench.engine.tuning.jobs.worker import Job, baselines_job_spec, session_job_spec, start_job
from workbench.app import messages as _messages, state as _state
from workbench.engine.base.words import plural
from workbench.viz.tuning import candidate_scores, candidates_figure, progress_figure, result_text, trial_table

st.title("Auto-tuning")
session = _state.session()
_messages.show_messages()
st.caption("The joint stage explores layout candidates of each complex op (ALT's templates), scoring each by its "
           "expert schedule (one measurement) plus the conversions it adds, then tunes loops on the best, starting "
           "from the expert schedule; ops with equal kernels are tuned once. The loop-only stage runs MetaSchedule "
           "on the current layouts. Budgets count hardware measurements. Tuning runs in a worker process.")

c1, c2, c3, c4 = st.columns(4)
# values live in _state.KEPT_WIDGETS, so they survive a visit to another page
stage = c1.radio("Stage", ["joint", "loop"], horizontal=True, key="tune_stage",
                 format_func=lambda s: "joint layout+loop" if s == "joint" else "loop only")
budget = int(c2.number_input("Budget (measurements)", 2, 5000, key="tune_budget"))
fraction = c3.slider("Joint share of budget", 0.1, 0.9, step=0.05, key="tune_fraction", disabled=stage != "joint")
rpc = c4.text_input("RPC tracker (host:port:key, optional)", key="tune_rpc")
options = TuneOptions(joint_fraction=fraction)
if stage == "joint":
    try:
        shares = joint_shares(_state.state(), budget, options)
    except WorkbenchError as e:
        st.warning(str(e))
    else:
        if few := [s for s in shares if s.candidates < min(2, s.space)]:
            st.warning("This budget scores only one layout candidate (the current layout) for "
                       + ", ".join(f"{s.op} ({s.budget} measurements of {budget}, {s.space} candidates)" for s in few)
                       + ": the joint stage cannot compare layouts there. Raise the budget or the joint share.")
        else:
            st.caption("Layout candidates scored: " + ", ".join(
                f"{s.op} {s.candidates} of {s.space}" + (f" (its result also for {', '.join(s.twins)})" if s.twins
                                                         else "") for s in shares) + ".")


def job_dir() -> Path:
    # per tab: another tab's run never shares (or overwrites) this one's folder
    return _state.WORK_DIR / "tune" / owner / f"{session.name}-{stage}-{session.key()}"


owner, queue = _state.tab_jobs("tuning", "tune_job")
job = st.session_state.get("tune_job")
running = job is not None and job.running()
start, stop = st.columns(2)
if start.button("Start tuning", icon=":material/play_arrow:", key="tune_start", type="primary", disabled=running):
    with _messages.attempt():
        spec = session_job_spec(session, stage, budget,
                                replace(options, rpc=RpcConfig.parse(rpc) if rpc.strip() else None))
        st.session_state.tune_job = start_job(spec, job_dir(), owner=owner, queue=queue)
        st.session_state.tune_base = (session.key(), len(session.steps))
        # the loop stage tunes every kernel: those not reached yet count as without a result
        st.session_state.tune_tasks = [k.name for k in _state.state().program.plan.kernels] if stage == "loop" else []
        st.session_state.pop("error", None)
if stop.button("Stop", icon=":material/stop:", key="tune_stop", disabled=not running):
    with _messages.attempt():
        job.stop(owner=owner)
st.caption(f"Jobs of every tab share this machine: {queue.limit} at a time, one per tab; the others wait in line.")


def trials(rows: list[dict]) -> None:
    """The trial table, filtered by task, stage and outcome."""
    table = pd.DataFrame(trial_table(rows))
    f1, f2, f3 = st.columns(3)
    tasks = f1.multiselect("Tasks", sorted(table["task"].unique()), key="trials_tasks", placeholder="all")
    stages = f2.multiselect("Stages", sorted(table["stage"].dropna().unique()), key="trials_stages", placeholder="all")
    outcome = f3.radio("Outcome", ["all", "measured", "failed"], horizontal=True, key="trials_outcome")
    keep = pd.Series(True, index=table.index)
    if tasks:
        keep &= table["task"].isin(tasks)
    if stages:
        keep &= table["stage"].isin(stages)
    if outcome != "all":
        keep &= table["latency ms"].isna() == (outcome == "failed")
    st.dataframe(table[keep], hide_index=True, width="stretch", key="tune_trials", row_height=_state.WRAPPED_ROWS,
                 column_config={"latency ms": st.column_config.NumberColumn(format="%.4f")})


@st.fragment(run_every=2.0)
def live() -> None:
    with _messages.guard("the tuning run's status"):  # a fragment reruns alone: the page's guard is not around it
        _live()


def _live() -> None:
    job: Job | None = st.session_state.get("tune_job")
    if job is None:
        st.info("No tuning run in this tab yet.")
        return
    rows = job.progress()
    status = job.status()
    tasks = st.session_state.get("tune_tasks", [])
    summary = summarize_progress(rows, tasks)
    run = pace(rows, job.budget or len(rows), job.started)
    st.markdown(f"**{status.state if status.error else status}** · "
                f"{run.text() if job.running() else plural(len(rows), 'measurement')} · {summary.headline()}"
                + (f" · {plural(summary.failed, 'failed candidate')} (skipped)" if summary.failed else ""))
    st.progress(min(1.0, run.done / max(1, run.budget)))
    if status.error:
        st.error(status.error)
    if status.state == "queued":
        st.info(f"Waiting for a free slot: {status}. It starts by itself when the jobs ahead finish.")
    if rows:
        left, right = st.columns(2)
        left.plotly_chart(progress_figure(rows, tasks=tasks), width="stretch", key="tune_curves")
        if any(r.get("stage") == "joint" for r in rows):
            right.plotly_chart(candidates_figure(rows), width="stretch", key="tune_candidates")
            right.dataframe(pd.DataFrame(candidate_scores(rows)), hide_index=True, width="stretch")
        with st.expander("Best latency per task"):
            st.caption("Their sum is the program's latency once every kernel has a result (loop stage); the joint "
                       "stage tunes the complex ops only, on any layout candidate, conversions not included.")
            st.dataframe(pd.DataFrame(summary.rows()), hide_index=True, width="stretch", key="tune_bests")
        with st.expander(f"Every measurement ({len(rows)})"):
            trials(rows)
    if status.state not in ("queued", "running") and st.session_state.get("tune_seen") != (str(job.dir), status.state):
        st.session_state.tune_seen = (str(job.dir), status.state)
        st.rerun()  # once, so the page shows the result buttons


live()


########## The result: applied (with Undo), or its figures and Apply ##########

def apply(job: Job, result: Callable[[], State], partial: bool) -> None:
    """Replace the session with a result (``on_click``) and record it in the job's folder: what
    changed, and the session before, for Undo."""
    before, got = _state.state(), {}
    base_key, base_len = st.session_state.get("tune_base", ("", 0))

    def change(_: State) -> State:
        got["state"] = result()
        return got["state"]

    if _state.act(change):  # the page says what was applied, with its Undo
        added = got["state"].session.steps[base_len:]
        record_applied(job.dir, before.session, got["state"].session,
                       kernel_changes(added, job.baselines(), before.session.key() == base_key), partial)
        st.session_state.tune_before = before  # Undo without a replay


def undo(job: Job, applied: Applied) -> None:
    kept = st.session_state.pop("tune_before", None)
    _state.act(lambda _: kept if kept is not None and kept.session.key() == applied.before_key
               else before_state(job.dir, applied), "the tuning result is undone: the session is as it was before")


def best_so_far(job: Job) -> State:
    got = job.partial_result(owner)
    if got is None or got.state is None:
        raise TuneError(got.reason if got else "this job is not a session tuning")
    return got.state


def time_baselines(job: Job) -> None:
    with _messages.attempt("timing against the baselines", rerun=False):
        start_job(baselines_job_spec(job), job.dir / "baselines", owner=owner, queue=queue)


def speedups(job: Job) -> None:
    """Each tuned kernel against its starting schedule, its expert schedule and the library."""
    report, timer = job.baselines(), Job.attach(job.dir / "baselines")
    if report is not None and report.kernels:
        st.markdown("**Speed-up against the baselines** (a baseline's median over the tuned kernel's)")
        st.caption("Timed interleaved, as the benchmarks time them; the spread is (max - min) / median of the "
                   "samples, and *within noise* means the two overlap. The library runs the op alone (its fused "
                   "bias or activation not included): the faster of PyTorch and NumPy (GMM only).")
        st.dataframe(pd.DataFrame(speedup_rows(report.kernels)), hide_index=True, width="stretch",
                     key="tune_speedups", column_config={"tuned ms": st.column_config.NumberColumn(format="%.4f")})
    elif report is not None and not report.error:
        st.caption("The result tunes no kernel (another network was kept): nothing to time against the baselines.")
    elif report is not None or (timer is not None and timer.status().state == "failed"):
        st.warning(f"Timing against the baselines failed: {report.error if report else timer.status().error}")
    if report is None and timer is not None and timer.running():
        st.info(f"Timing the tuned kernels against their baselines: {timer.status()}. The table appears here.")
        st.fragment(run_every=2.0)(_wait_for_baselines)(job)
    elif report is None:
        st.button("Time against the baselines", key="tune_time_baselines", on_click=time_baselines, args=(job,),
                  help="Each tuned kernel beside its starting schedule, its expert schedule and PyTorch / NumPy, "
                       "interleaved, in a worker process")


def _wait_for_baselines(job: Job) -> None:
    if job.baselines() is not None or not ((t := Job.attach(job.dir / "baselines")) and t.running()):
        st.rerun()  # the whole page, with the table


def result(job: Job) -> None:
    status = job.status()
    base_key, base_len = st.session_state.get("tune_base", ("", 0))
    applied = load_applied(job.dir)
    if applied is not None and applied.after_key == session.key():
        st.success(applied.text(), icon=":material/check:")
        st.button("Undo: restore the session as it was before", key="tune_undo", icon=":material/undo:",
                  on_click=undo, args=(job, applied))
        speedups(job)
        return
    if (tuned := job.tuned_state(owner)) is not None:
        # the steps past the base: tuned kernels, and for the joint stage the schedules of the kernels it did not tune
        st.success(f"Tuning done: {result_text(tuned.session.steps[base_len:])} These are the tuner's figures (one "
                   "measurement per candidate: the median of its repeats); a replay of the applied session "
                   "(Sessions page) times each kernel over repeats and says whether it differs from them beyond the "
                   "noise.")
        for line in job.network_report():  # kernels slower than measured, the network kept
            (st.warning if line.startswith("warning:") else st.caption)(line)
        speedups(job)
        label, get, partial = "Apply the result to the session", lambda: tuned, False
    elif status.state in ("stopped", "failed") and job.stage is not None:
        rows = job.progress()
        st.info(f"The run {status.state} after {plural(len(rows), 'measurement')}, before its result.")
        if why := partial_reason(job.stage, rows):
            st.warning(f"Its best so far cannot be applied: {why}.")
            return
        bests = ", ".join(f"{t.task} {t.best_ms:.4f} ms" for t in summarize_progress(rows).tasks if t.best_ms)
        st.info(f"Its best so far: {bests}. Applying it gives each kernel measured so far its best trace (checked "
                "against the reference first) and the other kernels what a finished run gives them.")
        speedups(job)
        label, get, partial = "Apply the best so far to the session", lambda: best_so_far(job), True
    else:
        return
    if base_key != session.key():
        st.warning("The session changed since this run started; applying replaces it with the tuned one "
                   "(Undo brings it back).")
    st.button(label, key="tune_apply", type="primary", on_click=apply, args=(job, get, partial))


if job is not None and not job.running():
    with _messages.guard("the tuning result"):
        result(job)
