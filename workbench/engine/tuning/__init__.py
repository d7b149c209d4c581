"""Auto-tuning: the loop-only stage (MetaSchedule), ALT's joint layout+loop stage, and the
worker process that runs either while the app or the CLI watches.

Modules, lowest first (each imports only those above it, plus the engine's own modules):

- ``startup``: what a process needs before its first tuning, applied explicitly (never on import);
- ``records``: ``TuneTask``, ``TuneResult`` and helpers for TVM's records and messages;
- ``eta``: the smoothed time left of a run (a moving rate, held while within 30%);
- ``progress``: the JSON-lines progress file and the measure callback that writes it;
- ``database``: the MetaSchedule ``JSONDatabase`` of a stage and the best record in it;
- ``rpc``: ``RpcConfig``, measurement on a TVM RPC tracker's servers;
- ``options``: ``TuneOptions`` and the one budget splitter;
- ``runner``: the builders and runners that measure candidates (``Measurers``);
- ``loop``: ``tune_loops``, the loop-only stage;
- ``joint``: ``joint_tune``, the joint stage for one complex op;
- ``stages``: ``tune_session``, either stage over a whole session;
- ``partial``: the best so far of a run that ended before its result;
- ``baselines``: a result timed against its starting schedule, expert schedule and PyTorch / NumPy;
- ``applied``: a result applied to a tab's session, and the session before it (Undo);
- ``worker``: tuning and replay jobs in separate processes (``python -m workbench.engine.tuning.jobs.worker``),
  queued machine-wide and owned by the browser tab that started them.

Importing any of them patches nothing global (``tests/engine/tuning/test_startup.py``).
"""

__all__: list[str] = []
