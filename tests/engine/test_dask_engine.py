"""The Dask path against the in-process path, on real local clusters and subprocesses."""

import contextlib
import dataclasses
import json
import os
import signal
import threading

import numpy as np
import pytest
from distributed import Client
from distributed.security import Security

from onebit_dask import OneBitMultiLabel, SyntheticProblem
from onebit_dask.testing import assert_same_fit

from tests.support.clusters import (DaskProcesses, TaskSpecSizes, local_client,
                                   make_certificates)
from tests.support.helpers import lineage_pickles, run_cli

pytestmark = pytest.mark.integration
PROBLEM = SyntheticProblem(40, 30, 2, flip=0.02, seed=9, n_test=500)
EXPLICIT = SyntheticProblem(40, 30, 2, flip=0.02, seed=9, n_test=500, sampler="explicit")
PARAMS = dict(batch_size=8000, n_iter=3, n_shards=4, random_state=0)


@pytest.fixture(scope="module")
def reference():
    return OneBitMultiLabel(2, **PARAMS).fit(PROBLEM)


@pytest.mark.parametrize("n_workers", [1, 2, 4])
def test_dask_equals_in_process(reference, n_workers, request):
    with contextlib.ExitStack() as stack:
        if n_workers == 2:  # the session's 2-worker cluster (a fresh one would be the same)
            client = request.getfixturevalue("client2")
        else:
            client = stack.enter_context(local_client(n_workers))
        with client.as_current():
            est = OneBitMultiLabel(2, engine="dask", **PARAMS).fit(PROBLEM)
            explicit = OneBitMultiLabel(2, engine="dask", **PARAMS).fit(EXPLICIT)
    assert_same_fit(reference, est)
    assert_same_fit(OneBitMultiLabel(2, **PARAMS).fit(EXPLICIT), explicit)


def test_projected_sampler_on_dask_equals_in_process(client2):
    projected = dataclasses.replace(PROBLEM, sampler="projected")
    with client2.as_current():
        on_dask = OneBitMultiLabel(2, engine="dask", **PARAMS).fit(projected)
    assert_same_fit(OneBitMultiLabel(2, **PARAMS).fit(projected), on_dask)


def test_randomized_init_on_dask_equals_in_process(client2):
    params = dict(PARAMS, init_svd="randomized")
    a = OneBitMultiLabel(2, **params).fit(PROBLEM)
    with client2.as_current():
        b = OneBitMultiLabel(2, engine="dask", **params).fit(PROBLEM)
    assert_same_fit(a, b)


@pytest.mark.parametrize("step", ["moment", "pooled", "refine", "select"])
def test_moment_step_on_dask_equals_in_process(client2, step):
    """The moment step on label-block shards: the initial batch's draws at every step, the
    thresholds' shares averaged, the low-rank part from ``V``; ``"pooled"``: each step the
initial estimate of the blocks' pools; ``"refine"``: pooled steps,
    then residual steps at the balanced scale; ``"select"``: both branches from the fork,
    each block scoring its bits (explicit draws), one branch kept."""
    base = EXPLICIT if step == "select" else PROBLEM
    imbalanced = dataclasses.replace(base, positive_rate=(0.05, 0.3))
    params = dict(PARAMS, step=step)
    with client2.as_current():
        on_dask = OneBitMultiLabel(2, engine="dask", **params).fit(imbalanced)
    assert_same_fit(OneBitMultiLabel(2, **params).fit(imbalanced), on_dask)


@pytest.mark.parametrize("step", ["paper", "moment", "select"])
def test_fit_on_arrays_on_dask_equals_in_process(client2, step):
    """Row-range shards (arrays in memory): each shard read once by a task on a worker,
    its per-label sums (or, for ``"select"``'s scores, its scored bits) handed to the
    blocks; the same bits as in-process."""
    X, labels, y = EXPLICIT.draw_batches(range(4), 6000, 2)
    params = dict(batch_size=6000, n_iter=3, n_shards=3, random_state=0, step=step)
    a = OneBitMultiLabel(2, **params).fit(X, labels, y, n_labels=30)
    with client2.as_current():
        b = OneBitMultiLabel(2, engine="dask", **params).fit(X, labels, y, n_labels=30)
    assert_same_fit(a, b)
    n_active = a.history_[-1]["n_active"]
    residual = step == "paper" or a.history_[-1].get("branch") == "refine"
    assert 0 < n_active < 6000 if residual else n_active == 6000


def test_validation_bits_of_a_label_matrix_on_dask_equal_in_process(client2):
    """The validation bits are read from the label matrix as given (the client's copy),
    not from the futures the engine holds: the same selected iterate, link and model as
    in-process."""
    X, signs = PROBLEM.full_observation(600)
    Y = (signs > 0).astype(np.int8)
    params = dict(batch_size=4000, n_iter=3, n_shards=3, random_state=0,
                  validation_fraction=0.5)
    a = OneBitMultiLabel(2, **params).fit(X, Y)
    with client2.as_current():
        b = OneBitMultiLabel(2, engine="dask", **params).fit(X, Y)
    assert_same_fit(a, b, link=True)
    assert all("validation_auc" in h for h in b.history_)


def test_no_task_carries_the_features_from_the_client(client2):
    problem = SyntheticProblem(200, 30, 2, seed=1, n_test=100)
    m, shards = 40_000, 4
    client2.register_plugin(TaskSpecSizes(), name="task-spec-sizes")
    with client2.as_current():
        OneBitMultiLabel(2, batch_size=m, n_iter=2, n_shards=shards, engine="dask").fit(problem)
    sizes = client2.run_on_scheduler(
        lambda dask_scheduler: dask_scheduler.plugins["task-spec-sizes"].sizes)
    assert len(sizes) >= 3 * shards
    shard_bytes = m // shards * problem.d1 * 4  # one shard's float32 features: 2 MB
    # the largest task carries (d1 + d2/S) x 2k factors, a few kB
    assert max(sizes.values()) < shard_bytes / 100, max(sizes.values())


def test_label_side_state_never_travels_from_the_client(client2):
    """With the matrix-free initialisation, no task carries more than O(k (d1 + k)) numbers:
    the label rows of Q, V and B stay in their blocks on the workers."""
    problem = SyntheticProblem(20, 20_000, 2, seed=1, n_test=100)
    client2.register_plugin(TaskSpecSizes(), name="task-spec-sizes")
    with client2.as_current():
        est = OneBitMultiLabel(2, batch_size=40_000, n_iter=3, n_shards=4,
                               init_svd="randomized", eval_every=0, engine="dask").fit(problem)
    sizes = client2.run_on_scheduler(
        lambda dask_scheduler: dask_scheduler.plugins["task-spec-sizes"].sizes)
    l, d1 = 4, problem.d1
    small = 8 * (l * (d1 + l)) * 6  # a few d1 x l and l x l blocks per task
    label_side = 8 * problem.d2 * l  # one d2 x l array: 640 kB
    assert max(sizes.values()) < small < label_side / 10, max(sizes.values())
    assert est.history_[-1]["auc"] > 0.6
    # what the client sent and gathered in a step (not evaluated): O(n_blocks l (d1 + l))
    assert 0 < est.history_[1]["client_bytes"] < label_side / 10


def test_the_steps_never_gather_the_label_blocks(client2, monkeypatch):
    """The blocks (every label's rows) come to the client only as the fitted model, never
    in a step: fits of 1 and 4 steps gather them equally often (an engine's block count is
    known without gathering them; a step that gathered them held ``d2 x l`` numbers and
    more in the client at every step)."""
    from onebit_dask.engine import dask_engine

    gathered = []
    blocks = dask_engine.DaskEngine.blocks
    monkeypatch.setattr(dask_engine.DaskEngine, "blocks",
                        lambda self: gathered.append(1) or blocks(self))
    problem = SyntheticProblem(20, 2000, 2, seed=1, n_test=100)
    counts = []
    for n_iter in (1, 4):
        gathered.clear()
        with client2.as_current():
            OneBitMultiLabel(2, batch_size=4000, n_iter=n_iter, n_shards=4,
                             engine="dask").fit(problem)
        counts.append(len(gathered))
    assert counts[0] == counts[1], counts


def test_large_arguments_go_to_the_cluster_once_a_round(client2, monkeypatch):
    """An array argument of ``SHARED_BYTES`` or more (lowered here below a ``d1 x l``
    top) is a task of its own that the blocks' tasks name: the lineage the scheduler
    holds grows by one copy of each new array a step, the new ``Q_top`` (which is the
    next step's ``Q`` and ``A``, not sent again) and the projected sampler's ``d1 x 6``
    directions, 2.5 tops, so between 1 and 3 tops; and the fit equals the in-process fit
    bit for bit. Power: with the arguments inside the tasks (the threshold above the
    tops' size) every block's ``step_open`` and ``step_close`` carry tops, more than
    2 x n_shards a step."""
    from onebit_dask.engine import dask_engine, placement

    monkeypatch.setattr(placement, "KEEP_LOCAL_LIMIT", 0)  # the fitted blocks stay there
    problem = SyntheticProblem(2000, 30, 2, seed=1, n_test=200)
    top = problem.d1 * 4 * 8  # a d1 x l top, l = 2k: 64 kB
    params = dict(batch_size=20_000, n_shards=4, random_state=0, eval_every=0)

    def growth_a_step(threshold):
        monkeypatch.setattr(dask_engine, "SHARED_BYTES", threshold)
        held = []
        for n_iter in (1, 3):
            with client2.as_current():
                est = OneBitMultiLabel(2, engine="dask", n_iter=n_iter, **params).fit(problem)
            keys = [h.key for h in est._state.blocks.handles]
            held.append(sum(map(len, client2.run_on_scheduler(lineage_pickles, keys=keys))))
        assert_same_fit(OneBitMultiLabel(2, n_iter=3, **params).fit(problem), est)
        return (held[1] - held[0]) / 2

    assert top <= growth_a_step(top // 4) <= 3 * top
    assert growth_a_step(2**40) > 2 * params["n_shards"] * top


def test_cli_on_a_running_scheduler_equals_in_process(client2, capsys):
    """``--scheduler ADDRESS``: a command line in its own process fits on a cluster it did
    not start (the session's), with the in-process numbers. (A ``dask scheduler`` process
    with ``dask worker`` processes: the TLS test below and the kill tests.)"""
    from onebit_dask.cli import main

    args = ["fit", "--d1", "40", "--d2", "30", "--rank", "2", "--batch-size", "8000",
            "--n-iter", "3", "--flip", "0.02", "--seed", "9", "--n-test", "500", "--json"]
    remote = run_cli(*args, "--scheduler", client2.scheduler.address, timeout=300)
    assert remote.returncode == 0, remote.stderr
    assert main([*args, "--workers", "0"]) == 0  # the in-process reference, in this process
    a, b = json.loads(capsys.readouterr().out), json.loads(remote.stdout)
    assert b["n_workers"] == 2 and a["n_workers"] == 0
    for key in ("auc", "spectral_error", "frobenius_error", "hamming_loss", "n_samples"):
        assert a[key] == b[key]


def test_tls_scheduler_via_cli(tmp_path, capsys):
    certs = make_certificates(tmp_path)
    tls_args = ["--tls-ca-file", certs["ca_file"], "--tls-cert", certs["cert"],
                "--tls-key", certs["key"]]
    procs = DaskProcesses(tmp_path, tls_args=tls_args)
    try:
        assert procs.address.startswith("tls://")
        # both workers in before the command (it fits on the workers it finds)
        security = Security(tls_ca_file=certs["ca_file"], tls_client_cert=certs["cert"],
                            tls_client_key=certs["key"], require_encryption=True)
        with Client(procs.address, security=security, timeout=300) as client:
            client.wait_for_workers(2, timeout=300)
        base = ["fit", "--d1", "30", "--d2", "20", "--rank", "2", "--batch-size", "4000",
                "--n-iter", "2", "--n-test", "200", "--json", "--scheduler", procs.address]
        proc = run_cli(*base, *tls_args, timeout=300)
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["n_workers"] == 2
        # without certificates the CLI refuses before connecting (main() in this process:
        # the exit-2 path of a real process is tested in cli/test_main.py)
        from onebit_dask.cli import main

        assert main(base) == 2 and "uses TLS" in capsys.readouterr().err
    finally:
        procs.close()


# a worker preload: the block tasks that draw batch 4 record the worker's pid in the Dask
# Variable "entered", set the Event "entered" and wait until the test sets the Event
# "release" (tasks recomputed after the release pass)
HOLD_BATCH_4 = """
import os
from distributed import Event, Variable
from onebit_dask.data.label_matrix import LabelMatrixShard
from onebit_dask.data.synthetic.problem import ProjectedShard, SyntheticShard

def held(activate):
    def activate_held(self, *args, **kwargs):
        if self.t == 4:
            Variable("entered").set(os.getpid())
            Event("entered").set()
            Event("release").wait()
        return activate(self, *args, **kwargs)
    return activate_held

for shard_class in (ProjectedShard, SyntheticShard, LabelMatrixShard):
    if "activate" in vars(shard_class):  # (dask may run a preload twice: wrap once)
        shard_class.activate = held(vars(shard_class)["activate"])
"""


@pytest.mark.parametrize("data", ["planted", "label matrix"])
def test_worker_killed_mid_fit_gives_the_same_result(tmp_path, data):
    """SIGKILL a worker while it runs a block task of step 4 (of 8): the scheduler
    recomputes its blocks from their lineage and the fit equals the undisturbed one. The
    lineage holds both kinds of arguments: ``SHARED_BYTES`` is lowered below the ``d1 x l``
    tops (100 x 4 x 8 bytes; conftest), which are then tasks of their own (recomputed
    too), the ``l x l`` ones stay inside the block tasks. A label matrix's ``X`` and
    ``Y`` blocks are shared with the cluster once; Dask's active memory manager, run
    once before the kill, keeps one copy of each, and those the victim held are
    recomputed too (scattered data were lost with it, and the fit failed).

    The workers' tasks of batch 4 wait for a Dask ``Event`` that the test sets after the
    kill, so the kill lands inside a task, after exactly 4 recorded iterations, whatever
    the machine's speed (the waits' timeouts only guard against a hang)."""
    from distributed import Event, Variable

    problem = SyntheticProblem(100, 50, 2, seed=2, n_test=300)
    if data == "label matrix":
        X, Y = problem.full_observation(2000)
        fit_args = (X, Y > 0)
    else:
        fit_args = (problem,)
    params = dict(batch_size=150_000, n_iter=8, n_shards=4, random_state=0)
    reference = OneBitMultiLabel(2, **params).fit(*fit_args)
    preload = tmp_path / "hold_batch_4.py"
    preload.write_text(HOLD_BATCH_4)
    procs = DaskProcesses(tmp_path, worker_args=["--preload", str(preload)])
    try:
        with Client(procs.address, timeout=300) as client:
            client.wait_for_workers(2, timeout=300)
            est = OneBitMultiLabel(2, engine="dask", **params)  # on the default client
            thread = threading.Thread(target=est.fit, args=fit_args)
            thread.start()
            try:
                assert Event("entered", client=client).wait(timeout=300)
                pid = Variable("entered", client=client).get(timeout=60)
                victim = next(w for w in procs.workers if w.pid == pid)
                assert len(est.history_) == 4  # the initialisation and steps 1-3
                client.amm.run_once()
                os.kill(victim.pid, signal.SIGKILL)
                assert victim.wait(timeout=60) == -signal.SIGKILL
            finally:
                Event("release", client=client).set()
                thread.join(timeout=600)
            assert not thread.is_alive()
            assert len(client.scheduler_info()["workers"]) == 1
    finally:
        procs.close()
    assert_same_fit(reference, est)


def test_unreachable_scheduler_is_a_clear_error():
    """``--connect-timeout 1`` is what the connection waits for: distributed's own connect
    timeout is set to an hour in the process, so a CLI that ignored the flag would run into
    this test's guard (which only stops a hang) instead of exiting with the message."""
    env = {**os.environ, "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "3600s"}
    proc = run_cli("fit", "--scheduler", "tcp://127.0.0.1:9", "--connect-timeout", "1", env=env)
    assert proc.returncode == 1  # a runtime failure (bad input would be 2)
    assert "could not reach the scheduler at tcp://127.0.0.1:9 within 1 s" in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("address", ["127.0.0.1:8786", "http://x:1", "tcp://host"])
def test_bad_scheduler_address(address):
    proc = run_cli("fit", "--scheduler", address)
    assert proc.returncode == 2 and "tcp://HOST:PORT" in proc.stderr


def test_embedded_cluster_listens_on_loopback(client2):
    addresses = [client2.scheduler.address, *client2.scheduler_info()["workers"]]
    assert all(a.startswith("tcp://127.0.0.1:") for a in addresses)


def test_the_packages_tasks_are_named_after_it(client2):
    """Every task a fit runs is ``onebit-<what>-<uuid>`` (the dashboard and the
    scheduler's logs tell them from other libraries' ``getitem`` or ``identity``)."""
    from distributed import get_task_stream
    from distributed.utils import key_split

    problem = SyntheticProblem(20, 12, 2, seed=1)
    with client2.as_current(), get_task_stream(client2) as stream:
        OneBitMultiLabel(2, batch_size=2000, n_iter=2, random_state=0,
                         engine="dask").fit(problem)
    keys = [str(t["key"]) for t in stream.data]
    assert keys and all(k.startswith("onebit-") for k in keys), sorted(keys)[:5]
    assert {"onebit-step-open", "onebit-transform"} <= {key_split(k) for k in keys}
