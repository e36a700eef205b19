"""Exercises of the chapter on positional. See utils/exercises/base.py."""

EXERCISES: list = []
