"""Explorers for the chapter on qkv. See utils/widgets/__init__.py."""

__all__: list[str] = []
