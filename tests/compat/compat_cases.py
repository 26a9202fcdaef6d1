# The cases of the torchrun compatibility suite, by group (one ctest per group: tests/CMakeLists.txt). Each case is
# one torchrun command line (compat_run.Case); the suite runs it under real torchrun, mgtrain's torchrun personality
# and `mgtrain launch`, and compares what they do (compat_compare.py). docs/torchrun-compat.md lists the cases.
from compat_run import Case

W = "{worker}"
# workers that report and ignore the launcher's stop signals, then sleep
IGNORING = [W, "--ignore", "TERM,INT,USR1", "--sleep", "60"]
C10D = ["--rdzv-backend", "c10d", "--rdzv-endpoint", "127.0.0.1:{port}", "--rdzv-id", "compat"]
STATIC_NODES = ["--nnodes", "2", "--master-addr", "127.0.0.1", "--master-port", "{port}"]
STATIC = STATIC_NODES + ["--nproc-per-node", "1"]

GROUPS = {
    # the environment contract, and how many workers each --nproc-per-node value starts
    "env": [
        Case("env_nproc1", ["--nproc-per-node", "1", W, "--lines", "2"]),
        Case("env_nproc2", ["--nproc-per-node", "2", W, "--lines", "2"]),
        Case("env_standalone_role", ["--standalone", "--nproc_per_node", "2", "--role", "trainer", "--max_restarts",
                                     "2", W]),
        Case("env_default_nproc", [W]),
        Case("nproc_cpu", ["--nproc-per-node", "cpu", W]),
        Case("nproc_auto", ["--nproc-per-node", "auto", W]),
        # LOCAL_RANK=0 for every worker, and each its own CUDA_VISIBLE_DEVICES
        Case("virtual_local_rank", ["--nproc-per-node", "2", "--virtual-local-rank", W]),
        Case("virtual_local_rank_visible", ["--nproc-per-node", "2", "--virtual-local-rank", W],
             env={"CUDA_VISIBLE_DEVICES": "3,1,2"}),
    ],
    # PET_* variables against flags, and a user's OMP_NUM_THREADS
    "pet": [
        Case("pet_nproc", [W], env={"PET_NPROC_PER_NODE": "2"}),
        Case("pet_flag_wins", ["--nproc-per-node", "1", W], env={"PET_NPROC_PER_NODE": "2"}),
        Case("pet_max_restarts", ["--nproc-per-node", "1", W], env={"PET_MAX_RESTARTS": "3"}),
        Case("user_omp_threads", ["--nproc-per-node", "2", W], env={"OMP_NUM_THREADS": "3"}),
        # a wrapper appends to a base command line: the last value wins
        Case("flag_twice", ["--nproc_per_node", "1", "--nproc_per_node", "2", W]),
    ],
    # rendezvous: static with two agents, c10d with one node of 1:2 and with two agents, c10d on port 0
    "rdzv": [
        Case("static_two_agents", [STATIC + ["--node-rank", "0", W], STATIC + ["--node-rank", "1", W]]),
        Case("c10d_one_of_1to2", ["--nnodes", "1:2", "--rdzv-conf", "last_call_timeout=1", "--nproc-per-node", "1"] +
             C10D + [W]),
        Case("c10d_two_agents", [["--nnodes", "2", "--nproc-per-node", "1"] + C10D + [W]] * 2),
        Case("c10d_port0", ["--rdzv-backend", "c10d", "--rdzv-endpoint", "localhost:0", "--nnodes", "1",
                            "--nproc-per-node", "2", W]),
    ],
    # two agents (static: fixed node ranks) with different roles (and --tee: the console prefix on each node), and
    # with different --nproc-per-node; --rdzv-conf as scripts write it
    "rdzv2": [
        Case("static_roles", [STATIC + ["--node-rank", "0", "--role", "trainer", "--tee", "3", W],
                              STATIC + ["--node-rank", "1", "--role", "evaluator", "--tee", "3", W]]),
        Case("static_uneven_roles", [STATIC_NODES + ["--node-rank", "0", "--nproc-per-node", "2", "--role", "a", W],
                                     STATIC_NODES + ["--node-rank", "1", "--nproc-per-node", "1", "--role", "b", W]]),
        Case("static_uneven_nproc", [STATIC_NODES + ["--node-rank", "0", "--nproc-per-node", "2", W],
                                     STATIC_NODES + ["--node-rank", "1", "--nproc-per-node", "1", W]]),
        Case("rdzv_conf_quotes", ["--nproc-per-node", "1", "--rdzv-conf", "'timeout=60'", W]),
        # as a shell script quotes it: the c10d rendezvous of one node does not read `timeout`
        Case("rdzv_conf_quoted_timeout", ["--nproc-per-node", "1", "--rdzv-conf='join_timeout=5,timeout=5'", W]),
    ],
    # restarts and restart counts; exit codes of failed jobs; error files with and without @record
    "restarts": [
        Case("restart_once", ["--nproc-per-node", "2", "--max-restarts", "1", W, "--exit", "3", "--fail-ranks", "0",
                              "--fail-attempts", "0", "--fail-after", "0.5", "--sleep", "2", "--sleep-ranks", "1"]),
        Case("restart_exhausted", ["--nproc-per-node", "1", "--max-restarts", "1", W, "--exit", "3"]),
        Case("worker_exit_code", ["--nproc-per-node", "2", W, "--exit", "7", "--fail-ranks", "1"],
             launcher_error_file=True),
    ],
    "errors": [
        Case("error_record", ["--nproc-per-node", "1", W, "--record", "--raise"], launcher_error_file=True),
        Case("error_no_record", ["--nproc-per-node", "1", W, "--raise"], launcher_error_file=True),
        Case("error_record_log_dir", ["--nproc-per-node", "1", "--log-dir", "{logs}", W, "--record", "--raise"],
             launcher_error_file=True),
    ],
    # signals to the launcher while the workers ignore them; --shutdown-timeout and TORCH_ELASTIC_SHUTDOWN_TIMEOUT
    "signals": [
        Case("signal_term", ["--nproc-per-node", "2", "--shutdown-timeout", "2"] + IGNORING, signal="TERM", ready=2,
             bound=(1.5, 8)),
        Case("signal_int", ["--nproc-per-node", "2", "--shutdown-timeout", "2"] + IGNORING, signal="INT", ready=2,
             bound=(1.5, 8)),
    ],
    "signals2": [
        Case("signal_usr1", ["--nproc-per-node", "2", "--shutdown-timeout", "2", W, "--ignore", "TERM,INT,USR1",
                             "--sleep", "8"], signal="USR1", ready=2),
        Case("shutdown_timeout_env", ["--nproc-per-node", "2"] + IGNORING, signal="TERM", ready=2, bound=(1.5, 8),
             env={"TORCH_ELASTIC_SHUTDOWN_TIMEOUT": "2"}),
    ],
    # a worker fails while another ignores SIGTERM: how long until the launcher exits
    "failure_stop": [
        Case("failure_stop", ["--nproc-per-node", "2", "--shutdown-timeout", "2", W, "--exit", "3", "--fail-ranks",
                              "0", "--fail-after", "1.5", "--ignore", "TERM", "--sleep", "60", "--sleep-ranks", "1"],
             bound=(1.5, 8), timeout=75),
    ],
    # where the workers' lines go: --redirects, --tee, --local-ranks-filter
    "output": [
        Case("redirects_3", ["--nproc-per-node", "2", "--log-dir", "{logs}", "--redirects", "3", W]),
        Case("tee_3", ["--nproc-per-node", "2", "--log-dir", "{logs}", "--tee", "3", W]),
        Case("redirect_1_tee_2", ["--nproc-per-node", "2", "--log-dir", "{logs}", "--redirects", "1", "--tee", "2",
                                  W]),
        Case("local_ranks_filter_tee", ["--nproc-per-node", "2", "--log-dir", "{logs}", "--tee", "3",
                                        "--local-ranks-filter", "1", W]),
        Case("local_ranks_filter", ["--nproc-per-node", "2", "--local-ranks-filter", "1", W]),
    ],
    # the line prefix template, --logs-specs, the duplicate filters
    "output2": [
        Case("prefix_template_tee", ["--nproc-per-node", "2", "--role", "trainer", "--tee", "3",
                                     "--log-line-prefix-template", "[${role_name}|${rank}|${local_rank}]", W]),
        Case("prefix_template", ["--nproc-per-node", "2", "--log-line-prefix-template", "<${rank}>", W]),
        Case("logs_specs_default", ["--logs-specs", "default", "--nproc-per-node", "1", W]),
        Case("duplicate_filters_tee", ["--nproc-per-node", "2", "--log-dir", "{logs}", "--tee", "3",
                                       "--duplicate-stdout-filters", "keep me", "--duplicate-stderr-filters", "n=0",
                                       W, "--extra", "keep me"]),
        Case("duplicate_filters", ["--nproc-per-node", "1", "--log-dir", "{logs}", "--duplicate-stdout-filters",
                                   "keep me", W, "--extra", "keep me"]),
    ],
    # how the program is started: -m, --run-path, --no-python, arguments after the script
    "programs": [
        Case("module", ["--nproc-per-node", "1", "-m", "compat_worker", "--lines", "1", "a b"]),
        Case("run_path", ["--nproc-per-node", "1", "--run-path", W, "x"]),
        Case("no_python", ["--nproc-per-node", "1", "--no-python", "{python}", W, "y"]),
        Case("script_arguments", ["--nproc-per-node", "1", W, "--lines", "1", "--", "--not-a-flag", "-m"]),
        Case("missing_script", ["--nproc-per-node", "1", "no_such_script.py"]),
    ],
    # a worker's torch FileTimer expires: torch's FileTimerServer kills it, then torchrun itself (137)
    "timer": [
        Case("file_timer_expiry", ["--nproc-per-node", "1", W, "--timer", "1", "--sleep", "30"],
             env={"TORCHELASTIC_ENABLE_FILE_TIMER": "1"}),
    ],
    # command lines torchrun refuses
    "refusals": [
        Case("bad_flag", ["--no-such-flag", W]),
        Case("bad_nproc", ["--nproc-per-node", "abc", W]),
        Case("nproc_gpu", ["--nproc-per-node", "gpu", W], note="refused on a host without CUDA"),
        Case("bad_nnodes", ["--nnodes", "x", W]),
        Case("no_script", ["--nproc-per-node", "1"]),
    ],
    # exit 2 only where torchrun's argparse refuses (a value int() or float() cannot read, a flag with a value),
    # 1 where torchrun parses the command line and then fails
    "refusals2": [
        Case("bad_int", ["--nproc-per-node", "1", "--max-restarts", "x", W]),
        Case("bad_int_pet", ["--nproc-per-node", "1", W], env={"PET_MAX_RESTARTS": "x"}),
        Case("int_underscores", ["--nproc-per-node", "1", "--max-restarts", " 1_0", W]),
        Case("flag_with_value", ["--nproc-per-node", "1", "--standalone=1", W]),
        Case("no_python_module", ["--nproc-per-node", "1", "--no-python", "-m", "compat_worker"]),
        Case("logs_specs_plugin", ["--nproc-per-node", "1", "--logs-specs=nope", W]),
        Case("rdzv_conf_quoted_int", ["--nproc-per-node", "1", "--rdzv-conf", "join_timeout='5'", W]),
    ],
}
