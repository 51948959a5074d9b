"""Tests of the repository around the package: the documentation, the packaging, the
layer picture (docs/ARCHITECTURE.md), the benchmarks and the test support itself."""
