"""Tests of onebit_dask.persist: test_<module>.py (or test_<module>_<aspect>.py) tests its
<module>.py."""
