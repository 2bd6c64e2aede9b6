"""Benchmarks of Merchant Platform (`scripts/bench [target...]`); see README.md in this folder."""
