"""Explorers for the chapter on at_scale. See utils/widgets/__init__.py."""

__all__: list[str] = []
