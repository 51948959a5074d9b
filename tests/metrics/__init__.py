"""Tests of onebit_dask.metrics: test_<module>.py (or test_<module>_<aspect>.py) tests its
<module>.py."""
