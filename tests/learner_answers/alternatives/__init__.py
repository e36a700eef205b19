"""Learner answers: alternatives."""
