#!/usr/bin/env bash
# The test suite's wall time against the CPU it takes on the whole machine (every process:
# the two test processes, the command lines, Dask schedulers and workers, the SLURM and SSH
# daemons and their jobs, which `time` does not count because pytest does not wait for
# them). The floor is CPU / cores: no order of the tests beats it on this machine.
#   bash benchmarks/suite_cpu.sh [PYTEST ARGS...]      (from the repository's root)
set -euo pipefail
# the machine's speed at the time: the same code takes 327-406 CPU-s from one run to the
# next here, as the host's load changes; a fixed piece of work timed just before (the
# CPU of importing scikit-learn in a fresh process, the median of 3) says which it was
python - <<'EOF'
import resource, statistics, subprocess, sys
def cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime
times = []
for _ in range(3):
    before = cpu()
    subprocess.run([sys.executable, "-c", "import sklearn.base"], check=True)
    times.append(cpu() - before)
print(f"calibration: importing scikit-learn takes {statistics.median(times):.2f} CPU-s "
      "(median of 3)")
EOF
read -r _ u n s _ _ q sq _ < /proc/stat
start=$(date +%s.%N)
status=0
python -m pytest -q "$@" || status=$?
end=$(date +%s.%N)
read -r _ u2 n2 s2 _ _ q2 sq2 _ < /proc/stat
tick=$(getconf CLK_TCK)
python3 - "$start" "$end" "$(( u2 + n2 + s2 + q2 + sq2 - u - n - s - q - sq ))" "$tick" <<'EOF'
import os, sys
start, end, busy, tick = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
cpu, cores = busy / tick, os.cpu_count()
print(f"suite: wall {end - start:.0f} s, CPU {cpu:.0f} s on {cores} cores, "
      f"floor {cpu / cores:.0f} s, cores busy {cpu / (end - start) / cores:.0%}")
EOF
exit "$status"
