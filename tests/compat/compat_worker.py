# The worker of the torchrun compatibility suite (tests/compat/torchrun_compat.py): the same program runs under real
# torchrun and under mgtrain's personality, so only the launcher differs. It dumps what it saw (environment, argv,
# interpreter, __name__) as JSON into $COMPAT_OUT, prints marked lines ("wline:") on stdout and stderr, reports the
# signals it ignores, sleeps (inside a torch FileTimer scope with --timer), and fails on request (an exit code, or an
# exception under torch's @record). Standard library only, except --record and --timer, which import torch.
import argparse
import json
import os
import signal
import sys
import time

MARK = "wline:"


def parse_args(argv):
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=1, help="marked lines per stream")
    parser.add_argument("--extra", default="", help="one more stdout line with this text")
    parser.add_argument("--exit", type=int, default=0, help="exit code on failure")
    parser.add_argument("--fail-ranks", default="", help="ranks that fail (empty: all, when --exit or --raise)")
    parser.add_argument("--fail-attempts", default="", help="restart counts that fail (empty: all)")
    parser.add_argument("--fail-after", type=float, default=0.0, help="seconds a failing rank waits first")
    parser.add_argument("--raise", dest="raise_", action="store_true", help="fail with an exception")
    parser.add_argument("--record", action="store_true", help="main under torch's @record")
    parser.add_argument("--ignore", default="", help="signals to report and ignore: TERM,INT,USR1,...")
    parser.add_argument("--sleep", type=float, default=0.0, help="seconds to sleep after the lines")
    parser.add_argument("--sleep-ranks", default="", help="ranks that sleep (empty: all)")
    parser.add_argument("--timer", type=float, default=0.0,
                        help="sleep inside torch's FileTimer scope (expires) of this many seconds, which the launcher "
                             "serves with TORCHELASTIC_ENABLE_FILE_TIMER=1")
    parser.add_argument("rest", nargs="*", help="arguments echoed in the dump")
    return parser.parse_args(argv)


def in_list(value, listed):
    return listed == "" or str(value) in listed.split(",")


def sleep(seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.05)


def say(stream, text):
    print(f"{MARK} {text}", file=stream, flush=True)


def main(args):
    rank = os.environ.get("RANK", "?")
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "?")
    who = f"rank={rank} local={os.environ.get('LOCAL_RANK', '?')} attempt={attempt}"
    out_dir = os.environ.get("COMPAT_OUT", ".")
    for name in filter(None, args.ignore.split(",")):
        signum = getattr(signal, "SIG" + name)
        signal.signal(signum, lambda s, _f: say(sys.stdout, f"{who} got {signal.Signals(s).name}"))
    dump = {
        "env": dict(os.environ),
        "argv": sys.argv[1:],
        "executable": sys.executable,
        "name": __name__,
        "cwd": os.getcwd(),
        "pid": os.getpid(),
    }
    with open(os.path.join(out_dir, f"env.a{attempt}.r{rank}.json"), "w") as f:
        json.dump(dump, f)
    for n in range(args.lines):
        say(sys.stdout, f"{who} stdout n={n}")
        say(sys.stderr, f"{who} stderr n={n}")
    if args.extra:
        say(sys.stdout, f"{who} {args.extra}")
    with open(os.path.join(out_dir, f"ready.a{attempt}.r{rank}"), "w") as f:
        f.write(str(time.time()))
    fails = (args.exit != 0 or args.raise_) and in_list(rank, args.fail_ranks) and in_list(attempt, args.fail_attempts)
    if not fails and args.sleep > 0 and in_list(rank, args.sleep_ranks):
        if args.timer > 0:
            from torch.distributed.elastic.timer import FileTimerClient, configure, expires

            configure(FileTimerClient(os.environ["TORCHELASTIC_TIMER_FILE"]))
            with expires(after=args.timer, scope="compat"):
                sleep(args.sleep)
        else:
            sleep(args.sleep)
    if fails:
        time.sleep(args.fail_after)
        with open(os.path.join(out_dir, f"failed.a{attempt}.r{rank}"), "w") as f:
            f.write(str(time.time()))
        if args.raise_:
            raise RuntimeError(f"compat worker {who} failed on purpose")
        sys.exit(args.exit)


if __name__ == "__main__":
    arguments = parse_args(sys.argv[1:])
    if arguments.record:
        from torch.distributed.elastic.multiprocessing.errors import record

        record(main)(arguments)
    else:
        main(arguments)
