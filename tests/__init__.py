"""The tests: one folder per subpackage of onebit_dask (``tests/<subpackage>/test_<module>.py``),
the top-level modules' tests here, the repository's own (docs, packaging, architecture,
benchmarks) in ``project/``, shared helpers in ``support/``, data files in ``files/``.
Every folder is a package, so that two test files may share a name."""
