"""Figures for the chapter on sdpa. See utils/plotting/__init__.py."""

__all__: list[str] = []
