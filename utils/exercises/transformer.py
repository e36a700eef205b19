"""Exercises of the chapter on transformer. See utils/exercises/base.py."""

EXERCISES: list = []
