"""Figures for the chapter on multihead. See utils/plotting/__init__.py."""

__all__: list[str] = []
