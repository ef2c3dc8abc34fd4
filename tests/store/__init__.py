"""Tests of the store, one module per store module (a package: tests/sim has modules of the same names)."""
