"""Plausible wrong answers for each chapter's exercises, one module per chapter; the chapter's module
in utils.exercises pairs each with its diagnosis."""
