"""Test-only helpers shared across the test folders (no fixtures: those live in conftest.py files)."""
