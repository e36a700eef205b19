"""Figures for the chapter on at_scale. See utils/plotting/__init__.py."""

__all__: list[str] = []
