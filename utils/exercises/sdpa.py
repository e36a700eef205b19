"""Exercises of the chapter on sdpa. See utils/exercises/base.py."""

EXERCISES: list = []
