"""Exercises of the chapter on multihead. See utils/exercises/base.py."""

EXERCISES: list = []
