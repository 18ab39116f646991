"""Kernels for tests/cover/test_compat.py (the interpreter compatibility layer)."""
