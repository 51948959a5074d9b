"""Fixed limits of what one run can hold: sizes beyond them are refused before any work.

The limits are constants, not this machine's free memory, so that a spec or a command
is accepted or refused the same way everywhere.

Hard limits (never allowed):

- ``d1``, ``d2`` (an observations store's ``n_labels`` too), ``batch_size``, ``n_test``
  and ``n_train`` at most :data:`MAX_SIZE` (``2**31 - 1``, the largest index NumPy's
  and Dask's int32 paths take);
- ``n_iter`` at most :data:`MAX_N_ITER` (``10**6`` steps; each step is at least one
  batch, and a cube holds every step's metrics).

Soft limits (allowed with ``--allow-large``, ``allow_large=True``, when a user means it):

- the largest array one fit holds at most :data:`MAX_ENTRIES` numbers (``2**30``,
  8 GiB of float64): the test features ``n_test x d1``, the factors
  ``(d1 + d2) x rank``, a full-observation training set ``n_train x (d1 + d2)``, and a
  batch's draws (``batch_size x d1`` explicit, ``batch_size x 3 rank`` projected,
  ``min(batch_size, d2) x d1`` conditional);
- a sweep grid at most :data:`MAX_CELLS` cells, and a cube at most
  :data:`MAX_CUBE_VALUES` values per metric (cells x iterations);
- the workers or jobs one command starts at most :data:`MAX_WORKERS` (``--workers``, a
  cluster config's ``n_workers``, an SSH config's ``worker_options.n_workers`` times its
  worker hosts, ``scale`` and ``adapt.maximum``, ``--adapt``);
- the threads of one worker at most :data:`MAX_THREADS_PER_WORKER` (a local config's
  ``threads_per_worker``, an SSH config's ``worker_options.nthreads``).
"""

from __future__ import annotations

MAX_SIZE = 2**31 - 1
MAX_N_ITER = 10**6
MAX_ENTRIES = 2**30
MAX_CELLS = 10**6
MAX_CUBE_VALUES = 10**8
MAX_WORKERS = 256
MAX_THREADS_PER_WORKER = 256
MAX_YAML_VALUES = 10**5
"""Values a spec or cluster config may hold once its aliases are expanded: nested aliases
(``a: &x [...]``, ``b: [*x, *x, ...]``) grow a short file exponentially."""

HARD = {"d1": MAX_SIZE, "d2": MAX_SIZE, "batch_size": MAX_SIZE, "n_test": MAX_SIZE,
        "n_train": MAX_SIZE, "n_iter": MAX_N_ITER}


def check_hard(name: str, value: int, shown: str | None = None) -> None:
    """``ValueError`` when ``value`` exceeds the hard limit of ``name`` (if it has one);
    the message calls it ``shown`` (``name`` by default; the command line's flag)."""
    high = HARD.get(name)
    shown = shown or name
    if high is not None and value > high:
        raise ValueError(f"{shown}={value} is not allowed: {shown} must be <= {high:,} "
                         "(a fixed limit of onebit-dask, see onebit_dask.utils.limits)")


def largest_array(sizes: dict, sampler: str = "explicit",
                  row_numbers: float | None = None) -> tuple[str, int]:
    """``(description, numbers)`` of the largest array a fit with ``sizes`` holds.

    Parameters
    ----------
    sizes : dict
        ``d1``, ``d2``, ``rank`` and optionally ``batch_size``, ``n_test``, ``n_train``.
    sampler : {"explicit", "projected", "conditional", "store"}
        How batches are drawn; ``"store"``: read from data (a file or a store):
        ``batch_size`` rows of ``row_numbers`` numbers and their ``2 rank`` scores.
    row_numbers : float, optional
        The numbers a row of the data holds (``d1`` when not given; the mean stored
        entries a row for sparse data, :attr:`onebit_dask.data.source.Source.row_numbers`).
    """
    d1, d2, rank = sizes["d1"], sizes["d2"], sizes["rank"]
    m = sizes.get("batch_size", 0)
    stored = d1 if row_numbers is None else row_numbers
    per_batch = {"explicit": m * d1, "store": int(m * (stored + 2 * rank)),
                 "projected": m * min(3 * rank, d1), "conditional": min(m, d2) * d1}[sampler]
    arrays = {"the factors (d1 + d2) x rank": (d1 + d2) * rank,
              f"a batch ({sampler})": per_batch,
              "the test features n_test x d1": sizes.get("n_test", 0) * d1,
              "the training set n_train x (d1 + d2)": sizes.get("n_train", 0) * (d1 + d2)}
    name = max(arrays, key=arrays.get)
    return name, arrays[name]


def check_sizes(sizes: dict, sampler: str = "explicit", allow_large: bool = False,
                names: dict | None = None, row_numbers: float | None = None) -> None:
    """Check every size of a fit against the hard limits, and (unless ``allow_large``)
    its largest array against :data:`MAX_ENTRIES`; ``ValueError`` naming the size, as
    ``names`` calls it (the command line's flags; a size's own name by default);
    ``row_numbers``: as :func:`largest_array`'s."""
    names = names or {}
    for name, value in sizes.items():
        check_hard(name, value, names.get(name))
    if allow_large:
        return
    what, n = largest_array(sizes, sampler, row_numbers)
    if n > MAX_ENTRIES:
        shown = ", ".join(f"{names.get(k, k)}={v}" for k, v in sizes.items())
        raise ValueError(f"{shown}: {what} would hold {n:,} numbers, more than {MAX_ENTRIES:,} "
                         "(8 GiB of float64): pass --allow-large (allow_large=True) if you "
                         "mean it")


def check_workers(name: str, value: int, allow_large: bool = False, hosts: int = 1) -> None:
    """``ValueError`` when a count of workers (or jobs) ``value`` on each of ``hosts``
    hosts (an SSH config's worker hosts) exceeds :data:`MAX_WORKERS` in all and not
    ``allow_large``; the message calls it ``name``."""
    total = value * hosts
    if not allow_large and total > MAX_WORKERS:
        shown = f"{name}={value}"
        if hosts > 1:
            shown += f" on {hosts} worker hosts ({total:,} workers)"
        raise ValueError(f"{shown} is not allowed: a command starts at most "
                         f"{MAX_WORKERS} workers or jobs (a fixed limit of onebit-dask, see "
                         "onebit_dask.utils.limits): pass --allow-large (allow_large=True) if you "
                         "mean it")


def check_threads(name: str, value: int, allow_large: bool = False) -> None:
    """``ValueError`` when the threads of one worker ``value`` exceed
    :data:`MAX_THREADS_PER_WORKER` and not ``allow_large``; the message calls it ``name``."""
    if not allow_large and value > MAX_THREADS_PER_WORKER:
        raise ValueError(f"{name}={value} is not allowed: a worker runs at most "
                         f"{MAX_THREADS_PER_WORKER} threads (a fixed limit of onebit-dask, see "
                         "onebit_dask.utils.limits): pass --allow-large (allow_large=True) if you "
                         "mean it")
