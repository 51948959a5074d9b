"""Peak memory of the CLI process of a fit with many labels (the client, with the embedded
LocalCluster's scheduler; not its worker processes).

    python benchmarks/bench_client_memory.py                       # the issue's command
    python benchmarks/bench_client_memory.py --checkouts /old/co .  # two versions, alternately
    python benchmarks/bench_client_memory.py --smoke

Runs ``onebit_dask.cli.main(argv)`` in a fresh Python process per run, with ``argv`` the
performance issue's ``fit --d1 100 --d2 1000000 --rank 3 --batch-size 1000000 --n-iter 2
--workers 2 --json --quiet`` (``--smoke``: ``--d2 2000 --batch-size 4000``), and reads
``ru_maxrss`` of that process. With ``--checkouts`` the versions run alternately,
``PYTHONPATH`` set to each, ``--repeats`` times; the children run in a temporary folder so
that ``PYTHONPATH`` picks the version. The fit's last history record's SHA-256 shows that
the versions fit the same. Memory only, no timing. The last line is JSON.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile

CHILD = """
import json, resource, sys
if __name__ == "__main__":
    from onebit_dask.cli import main
    status = main(sys.argv[1:])
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"status": status, "client_mib": round(peak, 1)}), file=sys.stderr)
"""

ISSUE = ["fit", "--d1", "100", "--d2", "1000000", "--rank", "3", "--batch-size", "1000000",
         "--n-iter", "2", "--workers", "2", "--json", "--quiet"]
SMOKE = ["fit", "--d1", "20", "--d2", "2000", "--rank", "2", "--batch-size", "4000",
         "--n-iter", "2", "--workers", "2", "--json", "--quiet"]


def run(checkout: str, argv: list, tmp: str) -> dict:
    child = os.path.join(tmp, "child.py")
    with open(child, "w") as f:
        f.write(CHILD)
    env = dict(os.environ, PYTHONPATH=os.path.abspath(checkout))
    proc = subprocess.run([sys.executable, child, *argv], cwd=tmp, env=env,
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{checkout}: exit {proc.returncode}: {proc.stderr[-500:]}")
    result = json.loads(proc.stderr.strip().splitlines()[-1])
    last = json.loads(proc.stdout)["history"][-1]
    last.pop("fit_s", None)
    result["history_sha256"] = hashlib.sha256(
        json.dumps(last, sort_keys=True).encode()).hexdigest()[:16]
    return result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkouts", nargs="+",
                    default=[os.path.dirname(os.path.dirname(os.path.abspath(__file__)))])
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args(argv)
    command = SMOKE if args.smoke else ISSUE
    peaks = {c: [] for c in args.checkouts}
    digests = {}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeats):
            for checkout in args.checkouts:
                result = run(checkout, command, tmp)
                peaks[checkout].append(result["client_mib"])
                digests[checkout] = result["history_sha256"]
                print(f"{checkout}: client peak {result['client_mib']} MiB "
                      f"(last record {result['history_sha256']})", flush=True)
    medians = {c: statistics.median(p) for c, p in peaks.items()}
    print(json.dumps({"command": command, "client_mib_median": medians,
                      "same_fit": len(set(digests.values())) == 1}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
