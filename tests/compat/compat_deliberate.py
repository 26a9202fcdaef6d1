# The deliberate differences of mgtrain's torchrun personality from real torchrun: where a case may differ, in
# which field, and why (docs/torchrun-compat.md shows this table; docs/torchrun.md explains each choice). A row
# covers a field of the cases its glob names; with `items`, only differing items that match that regex (a field
# is a list: environment lines, file names, console lines). Any other difference fails the case.
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
    Row("*", "log_files", r"^(run\.json|config\.yaml|failure\.json|heartbeat\S*) x\d+$",
        "mgtrain's run record, resolved config and failure report in the run directory"),
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
]
