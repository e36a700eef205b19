"""Explorers for the chapter on multihead. See utils/widgets/__init__.py."""

__all__: list[str] = []
