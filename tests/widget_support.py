"""Helpers for the explorer tests: compare what an explorer drew with its pure state function."""

from __future__ import annotations

import dataclasses

import torch


def assert_same_state(drawn, expected) -> None:
    """``drawn`` (an explorer's ``box.state``) equals ``expected`` field by field; tensors exactly."""
    assert type(drawn) is type(expected), f"drew a {type(drawn).__name__}, expected a {type(expected).__name__}"
    for field in dataclasses.fields(expected):
        got, want = getattr(drawn, field.name), getattr(expected, field.name)
        if isinstance(want, torch.Tensor):
            assert isinstance(got, torch.Tensor) and got.shape == want.shape and torch.equal(got, want), (
                f"{field.name}: the explorer drew a stale or different tensor")
        else:
            assert got == want, f"{field.name}: the explorer drew {got!r}, the state function gives {want!r}"


def png(box) -> bytes:
    """The PNG an explorer's ``Output`` shows now."""
    (shown,) = box.output.outputs
    return shown["data"]["image/png"]
