"""Tests of onebit_dask.engine: test_<module>.py (or test_<module>_<aspect>.py) tests its
<module>.py."""
