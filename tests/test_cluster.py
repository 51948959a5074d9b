"""Every shipped cluster config loads and turns into its cluster, job script or spec."""

import pathlib

import numpy as np
import pytest
from distributed import Client

from onebit_dask import OneBitMultiLabel, SyntheticProblem
from onebit_dask.cluster import (ClusterConfigError, cluster_spec, load_cluster_config,
                                 make_cluster, parse_cluster_config)

CONFIGS = sorted((pathlib.Path(__file__).parents[1] / "cluster").glob("*.yaml"))


def test_configs_are_shipped():
    names = {p.name for p in CONFIGS}
    assert {"local.yaml", "ssh.yaml", "slurm.yaml", "pbs.yaml", "kubernetes.yaml",
            "tls.yaml"} <= names


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_config_builds_its_spec(path):
    config = load_cluster_config(path)
    spec = cluster_spec(config)
    if config.kind == "slurm":
        assert "#SBATCH -p compute" in spec and "#SBATCH --mem=" in spec
        assert "--nthreads 1" in spec and "#SBATCH -A my-project" in spec
    elif config.kind == "pbs":
        assert "#PBS -q workq" in spec and "#PBS -l select=1:ncpus=4:mem=16GB" in spec
    elif config.kind == "kubernetes":
        assert spec["kind"] == "DaskCluster"
        assert spec["spec"]["worker"]["replicas"] == 4
        worker = spec["spec"]["worker"]["spec"]["containers"][0]
        assert worker["image"] == "ghcr.io/dask/dask:latest"
        assert worker["resources"]["limits"]["memory"] == "4Gi"
    else:
        assert spec == config.options


@pytest.mark.parametrize("name", ["local.yaml", "local-tls.yaml"])
def test_local_configs_start_and_fit(name):
    config = load_cluster_config(pathlib.Path(__file__).parents[1] / "cluster" / name)
    problem = SyntheticProblem(20, 10, 2, seed=1, n_test=100)
    params = dict(batch_size=2000, n_iter=2, random_state=0)
    with make_cluster(config) as cluster, Client(cluster) as client:
        if config.security:
            assert client.scheduler.address.startswith("tls://127.0.0.1:")
        client.wait_for_workers(2, timeout=60)
        est = OneBitMultiLabel(2, client=client, **params).fit(problem)
    np.testing.assert_array_equal(est.Q_, OneBitMultiLabel(2, **params).fit(problem).Q_)


@pytest.mark.parametrize("text, match", [
    ("kind: slurmm\n", r"kind='slurmm' is unknown \(did you mean 'slurm'\?\)"),
    ("options: {}\n", "missing key 'kind'"),
    ("kind: slurm\noptions: {cores: 4}\n", r"missing key 'options.memory'"),
    ("kind: slurm\noptions: {cores: four, memory: 4GB}\n",
     r"options.cores='four' has type str, expected int"),
    ("kind: local\noptions: {n_worker: 2}\n",
     r"unknown key 'options.n_worker' \(did you mean 'n_workers'\?\)"),
    ("kind: local\nscale: -1\n", r"scale=-1 must be >= 0"),
    ("kind: local\nscale: 2\nadapt: {maximum: 3}\n", "either 'scale' or 'adapt'"),
    ("kind: local\nsecurity: {cert: a.pem}\n", "'ca_file', 'cert' and 'key'"),
    ("kind: ssh\noptions: {hosts: [one]}\n", "at least one worker host"),
    ("- a list\n", "a mapping with a 'kind' key"),
    ("kind: local\nworkers: 3\n", r"unknown key 'workers'"),
])
def test_bad_configs_name_the_key(tmp_path, text, match):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ClusterConfigError, match=match):
        load_cluster_config(path)


def test_missing_file_and_bad_yaml(tmp_path):
    with pytest.raises(ClusterConfigError, match="does not exist"):
        load_cluster_config(tmp_path / "nope.yaml")
    (tmp_path / "bad.yaml").write_text("kind: [local\n")
    with pytest.raises(ClusterConfigError, match="not valid YAML"):
        load_cluster_config(tmp_path / "bad.yaml")


def test_tls_files_must_exist():
    config = parse_cluster_config({"kind": "local", "security": {
        "ca_file": "/nonexistent/ca.pem", "cert": "c", "key": "k"}})
    with pytest.raises(ClusterConfigError, match="security.ca_file='/nonexistent/ca.pem'"):
        make_cluster(config)
