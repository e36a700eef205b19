"""Exercises of the chapter on qkv. See utils/exercises/base.py."""

EXERCISES: list = []
