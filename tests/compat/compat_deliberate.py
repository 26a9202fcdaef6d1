# The deliberate differences of mgtrain's torchrun personality from real torchrun: where a case may differ, in
# which field, and why (docs/torchrun-compat.md shows this table; docs/torchrun.md explains each choice). A row
# covers a field of the cases its glob names; with `items`, only differing items that match that regex (a field
# is a list: environment lines, file names, console lines; case and field are globs). Any other difference fails the
# case.
import collections

Row = collections.namedtuple("Row", "case field items reason")

DELIBERATE = [
    Row("failure_stop", "timing", None,
        "torchrun ignores --shutdown-timeout after a worker failure (its process context stops the other workers "
        "with the default 30 s); mgtrain honours the flag"),
    Row("*", "env_added", r"^MGTRAIN_",
        "mgtrain's own variables for its workers (run directory, resolved config, console kind)"),
    Row("*", "cwd_files", r"^(node\d+/)?runs/",
        "without --log-dir mgtrain keeps its run directory (run.json, config, per-rank logs, failure report) in "
        "./runs; torchrun's logs go to a temporary directory"),
    Row("*", "log_files", r"^(run\.json|config\.yaml|failure\.json|launcher\.lock|heartbeat\S*) x\d+$",
        "mgtrain's run record, resolved config, failure report and launcher lock in the run directory"),
    Row("error_record_log_dir", "log_files", r"^(stdout|stderr)\.log",
        "mgtrain keeps every rank's whole output in the run directory (attempt_N/rank_R/stdout.log, stderr.log) "
        "even without --redirects or --tee, where torchrun writes none"),
    Row("duplicate_filters", "log_files", r"^(stdout|stderr)\.log",
        "mgtrain keeps every rank's whole output in the run directory (attempt_N/rank_R/stdout.log, stderr.log) "
        "even without --redirects or --tee, where torchrun writes none"),
    Row("*", "stderr", r"^\s+\| ",
        "mgtrain's failure report (instead of torchrun's ChildFailedError text) quotes the failed rank's last "
        "stderr lines"),
    Row("signal_usr1", "orphans", None,
        "torchrun does not handle SIGUSR1: it dies of it and leaves its workers running; mgtrain never leaves "
        "workers behind"),
    Row("signal_usr1", "stdout", r"got SIGTERM$",
        "the same choice seen by the workers: before dying of an unhandled SIGUSR1 (the status torchrun's shell "
        "sees), mgtrain stops its workers with SIGTERM, so they print what their handler prints"),
    Row("*", "env", r"(^|\s)TORCHELASTIC_USE_AGENT_STORE=",
        "mgtrain's launcher hosts no store: global rank 0 hosts the workers' TCPStore (TORCHELASTIC_USE_AGENT_STORE"
        "=False), so a restart never meets a store full of the last attempt's keys"),
    Row("*", "env_added", r"^NCCL_ASYNC_ERROR_HANDLING$",
        "set beside TORCH_NCCL_ASYNC_ERROR_HANDLING for workers on torch before 2.2, which read only the old name"),
    Row("static_*", "env", r"(^|\s)(MASTER_PORT=<(port|free port)>|TORCHELASTIC_RUN_ID=(none|<run-id>))",
        "several static nodes: --master-port is the port of mgtrain's rendezvous, and rank 0 hosts the workers' "
        "store on a free port; TORCHELASTIC_RUN_ID is the run's id (its directory's name), never torchrun's shared "
        "default 'none', under which two jobs would share one run directory"),
    Row("c10d_port0", "env", r"(^|\s)TORCHELASTIC_RUN_ID=(none|<run-id>)",
        "TORCHELASTIC_RUN_ID is the run's id (its directory's name), never torchrun's shared default 'none'"),
    Row("c10d_*", "env", r"(^|\s)MASTER_ADDR=",
        "several nodes meeting at --rdzv-endpoint: MASTER_ADDR is the endpoint's host, the address every node "
        "already reaches, where torchrun gives node 0's fully qualified host name"),
    Row("worker_exit_code", "*", r"^(a0\.r0|wline: rank=0 )",
        "mgtrain notices a worker's death at once and stops the others, which may not have started or printed yet; "
        "torchrun looks every --monitor-interval (0.1 s), by which time they have"),
]
