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


def test_what_a_worker_imports_for_a_fit_leaves_out_scikit_learn_and_scipy_stats():
    # a Dask worker unpickles the fit's tasks: label blocks, the sources' shards, the
    # planted problem and its samplers, the feature map (each worker process pays imports)
    modules = ("onebit_dask.engine.blocks", "onebit_dask.engine.topk", "onebit_dask.synthetic",
               "onebit_dask.data.label_matrix", "onebit_dask.data.arrays",
               "onebit_dask.data.csr_source", "onebit_dask.features",
               "onebit_dask.validation_bits")
    code = (f"import sys\nfor name in {modules!r}:\n    __import__(name)\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'sklearn'"
            " or m.startswith('scipy.stats')))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
