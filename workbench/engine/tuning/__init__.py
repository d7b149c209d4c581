"""Auto-tuning: the loop-only stage (MetaSchedule), ALT's joint layout+loop stage, and the jobs
that run either in a worker process while the app or the CLI watches.

- ``startup``, ``records``, ``eta``, ``progress``, ``database``, ``rpc``, ``options``, ``runner``:
  what a tuning needs (start-up, tasks and results, progress, its database, where and how it measures);
- ``loop``: ``tune_loops``, the loop-only stage; ``joint``: ``joint_tune``, the joint stage of one op;
- ``seed``, ``apply``, ``settle``, ``check``: expert seeds, results pushed to a session, the kernels
  the joint stage changed tuned again, each tuned kernel checked in the network;
- ``stages``: ``tune_network``, either stage over a whole session;
- ``jobs``: a job's spec, files, handle (``start_job``, ``Job``, the machine-wide ``JobQueue``) and
  ``worker`` process; a stopped run's best so far, baselines, and a result applied (with Undo).

Importing any of them patches nothing global (``tests/engine/tuning/test_startup.py``).
"""

__all__: list[str] = []
