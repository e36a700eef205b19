"""Explorers for the chapter on sdpa. See utils/widgets/__init__.py."""

__all__: list[str] = []
