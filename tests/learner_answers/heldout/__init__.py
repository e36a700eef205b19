"""Learner answers: heldout."""
