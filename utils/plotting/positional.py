"""Figures for the chapter on positional. See utils/plotting/__init__.py."""

__all__: list[str] = []
