"""Figures for the chapter on transformer. See utils/plotting/__init__.py."""

__all__: list[str] = []
