"""Tests of onebit_dask.utils: test_<module>.py (or test_<module>_<aspect>.py) tests its
<module>.py."""
