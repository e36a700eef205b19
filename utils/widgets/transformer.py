"""Explorers for the chapter on transformer. See utils/widgets/__init__.py."""

__all__: list[str] = []
