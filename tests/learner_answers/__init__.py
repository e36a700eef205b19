"""Realistic learner answers for issue 34: wrong answers (tune, heldout) and correct alternatives."""
