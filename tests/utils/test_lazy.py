"""The package's names are imported on first use (PEP 562)."""

import subprocess
import sys


def python_says(code) -> str:
    """What ``python -c code``, in a fresh process, prints (it must exit 0)."""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_names_are_imported_on_first_use():
    code = ("import sys, onebit_dask, onebit_dask.sweep as sweep\n"
            "assert 'sklearn' not in sys.modules and 'xarray' not in sys.modules\n"
            "assert 'SyntheticProblem' in dir(onebit_dask) and 'run_sweep' in dir(sweep)\n"
            "from onebit_dask.data.synthetic.problem import SyntheticProblem\n"
            "assert onebit_dask.SyntheticProblem is SyntheticProblem\n"
            "assert 'SyntheticProblem' in vars(onebit_dask)\n"
            "try:\n    onebit_dask.nope\nexcept AttributeError as e:\n    print(e)\n")
    assert python_says(code) == "module 'onebit_dask' has no attribute 'nope'"


def test_what_a_worker_imports_for_a_fit_leaves_out_scikit_learn_and_scipy_stats():
    # a Dask worker unpickles the fit's tasks: label blocks, the sources' shards, the
    # planted problem and its samplers, the stores' readers, the feature map (each worker
    # process pays imports: scikit-learn's are 0.85 s of CPU and 70 MiB)
    modules = ("onebit_dask.engine.blocks", "onebit_dask.engine.topk",
               "onebit_dask.data.synthetic.problem", "onebit_dask.data.label_matrix",
               "onebit_dask.data.arrays", "onebit_dask.data.csr", "onebit_dask.io.csr_store",
               "onebit_dask.io", "onebit_dask.io.observations", "onebit_dask.data.observations",
               "onebit_dask.ops.features", "onebit_dask.fit.validation")
    code = (f"import sys\nfor name in {modules!r}:\n    __import__(name)\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'sklearn'"
            " or m.startswith('scipy.stats')))\n")
    assert python_says(code) == "[]"


def test_a_sweeps_client_and_its_report_leave_out_scikit_learn():
    # the runner that sends cells to a cluster, and the report, read the method table;
    # the cells' estimators are imported where the cells run
    code = ("import sys\nimport onebit_dask.sweep.runner, onebit_dask.sweep.report\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'sklearn'))\n")
    assert python_says(code) == "[]"


def test_a_fit_in_process_imports_neither_dask_nor_zarr():
    # without a client there is nothing for distributed to do (0.25 s of imports), and
    # without a store to write nothing for zarr: the library's fit and the command line's
    # in-process fit leave both out
    code = ("import sys\nimport numpy as np\nfrom onebit_dask import OneBitMultiLabel\n"
            "from onebit_dask.cli import main\n"
            "X, Y = np.random.default_rng(0).normal(size=(60, 4)), np.eye(60, 3, dtype=int)\n"
            "OneBitMultiLabel(2, batch_size=100, n_iter=1, random_state=0).fit(X, Y)\n"
            "assert main(['fit', '--d1', '6', '--d2', '4', '--rank', '2', '--batch-size', '100',"
            " '--n-iter', '1', '--n-test', '50', '--workers', '0', '--quiet']) == 0\n"
            "print(sorted(m for m in ('dask', 'distributed', 'zarr') if m in sys.modules))\n")
    assert python_says(code).splitlines()[-1] == "[]"
