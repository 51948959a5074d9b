"""The package's names are imported on first use (PEP 562)."""

import subprocess
import sys


def test_names_are_imported_on_first_use():
    code = ("import sys, onebit_dask, onebit_dask.sweep as sweep\n"
            "assert 'sklearn' not in sys.modules and 'xarray' not in sys.modules\n"
            "assert 'SyntheticProblem' in dir(onebit_dask) and 'run_sweep' in dir(sweep)\n"
            "from onebit_dask.synthetic import SyntheticProblem\n"
            "assert onebit_dask.SyntheticProblem is SyntheticProblem\n"
            "assert 'SyntheticProblem' in vars(onebit_dask)\n"
            "try:\n    onebit_dask.nope\nexcept AttributeError as e:\n    print(e)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "module 'onebit_dask' has no attribute 'nope'"
