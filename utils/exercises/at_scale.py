"""Exercises of the chapter on at_scale. See utils/exercises/base.py."""

EXERCISES: list = []
