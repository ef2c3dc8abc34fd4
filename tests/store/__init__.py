"""Tests of the store, one module per store module (a package: tests/simulator has modules of the same names)."""
