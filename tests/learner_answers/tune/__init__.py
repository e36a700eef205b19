"""Learner answers: tune."""
