"""Explorers for the chapter on positional. See utils/widgets/__init__.py."""

__all__: list[str] = []
