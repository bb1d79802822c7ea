"""Shipped device and topology presets (YAML package data)."""
