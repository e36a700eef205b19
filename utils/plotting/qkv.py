"""Figures for the chapter on qkv. See utils/plotting/__init__.py."""

__all__: list[str] = []
