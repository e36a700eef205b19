"""Chapter 7's probes for RMSNorm and rotate-half RoPE: what the learner's function divides by, and which
features it pairs and by which angles it turns them (grouped-query attention and the sink mask are in
:mod:`utils.exercises.probing.llm_attention`).

* ``rms_norm``: with weight = 1, the learner's output read as x times one number per vector: the divisor
  is compared with sqrt(mean(x²) + eps) and with what each known slip divides by (eps outside the root,
  no eps, a sum, no root, the standard deviation, a fixed eps of its own); an output that is (x − mean) times
  a number is LayerNorm, one divided per feature across the positions is the wrong dim; vectors of root mean
  square 0.04, 0.1 and 1.3 show eps used as a floor (divided by the RMS above it, by the floor below). With
  weight = 1 right, the gain is read.
* ``rotate_half_rope``: unit vectors e_b, one per feature b, at positions 0, 1, 4, 9 with base 500: each
  output is column b of the rotation. Position 0 must give e_b back; at position 1 the other feature e_b
  leaks into is its partner (b + D/2 in this layout, b ^ 1 in chapter 4's), with rotate_half's minus sign
  (without it the halves are swapped, a reflection); the angle of each feature is
  read back and compared with position · base^(-2i/D): its sign, the positions used, the frequency of each
  feature (halves that differ: angles repeat-interleaved), and the base and exponent behind them.

See :mod:`utils.exercises.probes` for the contract.
"""

from __future__ import annotations

import math

import torch

from utils.exercises.probes import Probe
from utils.exercises.probing.kit import contrast, numbers, probe_output, reference_output, same
from utils.i18n.messages import tr


def _see_rmsnorm() -> str:
    return tr("see 'RMSNorm'")


def _see_rope() -> str:
    return tr("see 'Rotate-half RoPE'")

# --------------------------------------------------------------------------------------------------
# rms_norm
# --------------------------------------------------------------------------------------------------


def _rms_inputs(gen: torch.Generator) -> list:
    x = torch.randn(3, 8, generator=gen) + torch.tensor([[0.7], [-0.4], [1.5]])  # non-zero means
    weight = 1 + torch.rand(8, generator=gen)  # a gain between 1 and 2
    small = torch.randn(3, 8, generator=gen)
    small = small / small.pow(2).mean(-1, keepdim=True).sqrt() * torch.tensor([[0.04], [0.1], [1.3]])  # these RMS
    return [{"x": x, "weight": torch.ones(8), "eps": 0.25}, {"x": x, "weight": weight, "eps": 0.25},
            {"x": small, "weight": torch.ones(8), "eps": 0.25}]


def _floor_explain(reference, inputs, outcomes) -> str | None:
    """Vectors of RMS 0.04, 0.1 and 1.3 with eps = 0.25: divided by their RMS where it is above some floor f and by
    f below it, eps is a floor (clamp, max), not added. ``inputs`` and ``outcomes``: those of _rms_inputs."""
    got = probe_output(outcomes, 2)
    if got is None or got.shape != inputs[2]["x"].shape or not got.is_floating_point():
        return None
    x, eps = inputs[2]["x"].double(), inputs[2]["eps"]
    c = _per_row_factor(got.double(), x)
    if c is None:
        return None
    divisor, rms = 1 / c.squeeze(-1), x.pow(2).mean(-1).sqrt()
    floor = float(divisor[0])
    if not (floor > float(rms[0]) * 1.5 and same(divisor[:2], torch.full((2,), floor, dtype=torch.float64))
            and same(divisor[2:], rms[2:]) and floor < float(rms[2])):
        return None
    names = ((eps, tr(" (eps itself)")), (math.sqrt(eps), tr(" (sqrt(eps): the mean square clamped at eps)")),
             (eps / math.sqrt(x.shape[-1]), tr(" (eps / sqrt(E): F.normalize's floor on the length sqrt(sum(x²)))")))
    note = next((name for value, name in names if abs(floor - value) < 1e-4 * value), "")
    return tr("with weight = 1 and eps = {eps:g} your function divides vectors of root mean square {rms} by {got}: "
              "by sqrt(mean(x²)) itself above a floor of {floor:.3g}{note}, and by the floor below it, so eps is used "
              "as a floor (a clamp or max), not added; RMSNorm divides by sqrt(mean(x²) + eps) = {want}, eps inside "
              "the root, for every vector ({where})", eps=eps, rms=numbers(rms), got=numbers(divisor),
              floor=floor, note=note, want=numbers((rms ** 2 + eps).sqrt()), where=_see_rmsnorm())


def _per_row_factor(got: torch.Tensor, base: torch.Tensor) -> torch.Tensor | None:
    """``c`` (one number per row) with ``got == base * c``, or None."""
    c = (got * base).sum(-1, keepdim=True) / (base * base).sum(-1, keepdim=True).clamp_min(1e-30)
    return c if same(got, base * c, atol=1e-5) else None


def _rms_explain(reference, inputs, outcomes) -> str | None:
    got, expected = probe_output(outcomes, 0), reference_output(reference, inputs[0])
    if got is None or got.shape != expected.shape or not got.is_floating_point():
        return None
    x, eps = inputs[0]["x"].double(), inputs[0]["eps"]
    got = got.double()
    if same(got, expected):
        return _gain_explain(reference, inputs, outcomes, got)
    if same(got, expected.double() + inputs[0]["weight"].double()):
        return tr("with weight = 1 your output is the right one plus 1: the gain is added; multiply the normalised "
                  "x by weight, feature by feature ({where})", where=_see_rmsnorm())
    centred = x - x.mean(-1, keepdim=True)
    if _per_row_factor(got, x) is None and _per_row_factor(got, centred) is not None:
        return tr("with weight = 1 your output is (x − mean(x)) times a number per vector: you subtracted the mean, "
                  "which is LayerNorm; RMSNorm divides x itself by sqrt(mean(x²) + eps), no centring ({where})",
                  where=_see_rmsnorm())
    c = _per_row_factor(got, x)
    if c is None:
        columns = (got * x).sum(-2, keepdim=True) / (x * x).sum(-2, keepdim=True)
        if same(got, x * columns, atol=1e-5):
            return tr("with weight = 1 your output is x divided by one number per feature, shared by the vectors: "
                      "you normalised across the vectors (dim -2); RMSNorm takes each vector's own mean square over "
                      "its E features, the last dim ({where})", where=_see_rmsnorm())
        return None
    divisor = (1 / c.squeeze(-1)).tolist()
    square = x.pow(2).mean(-1)
    if same(torch.tensor(divisor), square.sqrt(), atol=1e-5) and (floor := _floor_explain(reference, inputs, outcomes)):
        return floor
    candidates = (
        (square.sqrt() + eps, tr(": eps added outside the square root, sqrt(mean(x²)) + eps")),
        (square.sqrt(), tr(": eps left out, sqrt(mean(x²)) (or a tiny eps of your own in place of the eps "
                           "argument)")),
        ((square * x.shape[-1] + eps).sqrt(), tr(": a sum of squares instead of their mean, sqrt(sum(x²) + eps)")),
        (square + eps, tr(": no square root, mean(x²) + eps")),
        ((x.var(-1) + eps).sqrt(), tr(": the standard deviation (which subtracts the mean), sqrt(var(x) + eps)")),
        ((x.var(-1, unbiased=False) + eps).sqrt(),
         tr(": the standard deviation (which subtracts the mean), sqrt(var(x) + eps)")),
    )
    candidates += (
        ((square * x.shape[-1]).sqrt() + eps, tr(": the length of the vector plus eps, sqrt(sum(x²)) + eps (a sum, "
                                                 "not a mean, and eps outside the root)")),
        (x.abs().mean(-1) + eps, tr(": the mean of |x| plus eps, not the root of the mean of x²")),
        (x.abs().mean(-1), tr(": the mean of |x|, not the root of the mean of x²")),
        ((square + eps ** 2).sqrt(), tr(": eps squared, sqrt(mean(x²) + eps²)")),
    )
    note = next((text for value, text in candidates if same(torch.tensor(divisor), value, atol=1e-5)), "")
    added = torch.tensor(divisor, dtype=torch.float64) ** 2 - square  # what was added to the mean square
    if not note and float(added.min()) > 1e-4 and float(added.max() - added.min()) < 1e-5 * float(added.max()) + 1e-7:
        note = tr(": sqrt(mean(x²) + {c:.3g}), a fixed eps of your own instead of the eps argument",
                  c=float(added.mean()))
    if not note and len(set(round(d, 6) for d in divisor)) == 1:
        note = tr(": one number for every vector, the mean square of the whole tensor; take it over each vector's "
                  "last dim (dim=-1, keepdim=True)")
    return tr("with weight = 1 and eps = {eps:g} your function divides each vector by {got}{note}; RMSNorm divides "
              "by sqrt(mean(x²) + eps) = {want}, the mean over the last dim, eps inside the root ({where})",
              eps=eps, got=numbers(divisor), note=note, want=numbers((square + eps).sqrt()), where=_see_rmsnorm())


def _gain_explain(reference, inputs, outcomes, plain: torch.Tensor) -> str | None:
    got, expected = probe_output(outcomes, 1), reference_output(reference, inputs[1])
    if got is None or got.shape != expected.shape or not got.is_floating_point() or same(got, expected):
        return None
    weight = inputs[1]["weight"].double()
    if same(got, plain):
        return tr("your output is right with weight = 1 and does not change with another weight: the gain is "
                  "ignored; multiply the normalised x by weight, feature by feature ({where})", where=_see_rmsnorm())
    if same(got.double(), plain + weight):
        return tr("your output is right with weight = 1, but a gain is added to it: multiply the normalised x by "
                  "weight, do not add it ({where})", where=_see_rmsnorm())
    return tr("your output is right with weight = 1 and wrong with another weight: the normalised x is multiplied "
              "by weight, feature by feature, (..., E) * (E,) ({where})", where=_see_rmsnorm())


def _rms_shapes(gen: torch.Generator) -> list:
    weight = 1 + torch.rand(6, generator=gen)
    return [{"x": torch.randn(*lead, 6, generator=gen) + 0.3, "weight": weight, "eps": 1e-6}
            for lead in ((), (1,), (4,), (2, 3), (2, 2, 3))]


RMS_PROBES = (Probe("divisor_read_back", _rms_inputs, _rms_explain), contrast("shapes", _rms_shapes))


# --------------------------------------------------------------------------------------------------
# rotate_half_rope
# --------------------------------------------------------------------------------------------------

_D, _POSITIONS, _BASE = 8, (0, 1, 4, 9), 500.0


def _rope_inputs(gen: torch.Generator) -> list:
    x = torch.eye(_D)[:, None, :].expand(_D, len(_POSITIONS), _D).contiguous()  # x[b, k] = e_b: (D, L, D)
    return [{"x": x, "positions": torch.tensor(_POSITIONS), "base": _BASE}]


def _features(items) -> str:
    return ", ".join(str(int(i)) for i in items)


def _rope_explain(reference, inputs, outcomes) -> str | None:
    got, expected = probe_output(outcomes, 0), reference_output(reference, inputs[0])
    if got is None or got.shape != expected.shape or not got.is_floating_point() or same(got, expected, atol=1e-4):
        return None
    got, half, rows = got.double(), _D // 2, torch.arange(_D)
    eye = torch.eye(_D, dtype=torch.float64)
    if bool((got - got[:, :1]).abs().max() < 1e-6):
        return tr("your output is the same at every position: the angles must grow with the position, one row of D/2 "
                  "angles per position, positions[:, None] · θ[None, :], shape (L, D/2) ({where})", where=_see_rope())
    leak = (got - eye[:, None, :]).abs()  # (D, positions, D): where each unit vector went
    leak[rows, :, rows] = 0
    still = [b for b in range(_D) if float(leak[b].max()) < 1e-6]
    if len(still) == _D and _halves_of_positions(inputs[0], got):
        return tr("your rotate_half cuts x in two along dim -2, the positions, so no feature turns with another: "
                  "cut the last dim, the D features, x.chunk(2, dim=-1), and concatenate along it ({where})",
                  where=_see_rope())
    if still:
        return tr("for D = {D} your function never mixes features {still} with another feature: each feature i < D/2 "
                  "turns together with feature i + D/2, both halves, out = x · cos + rotate_half(x) · sin ({where})",
                  D=_D, still=_features(still), where=_see_rope())
    if same(got, _rope_formula(inputs[0], _swap_halves), atol=1e-4):
        return tr("your rotate_half has no minus sign: [x2, x1] swaps the halves, a reflection, not a rotation "
                  "(it changes the length of the vectors); rotate_half([x1, x2]) = [-x2, x1] ({where})",
                  where=_see_rope())
    partners = [int(leak[b].amax(0).argmax()) for b in range(_D)]
    want = [(b + half) % _D for b in range(_D)]
    if partners == [b ^ 1 for b in range(_D)]:
        return tr("you rotate the neighbouring features (0, 1), (2, 3), …: that is chapter 4's interleaved layout. "
                  "Rotate-half RoPE, as Llama, Qwen and SmolLM write it, pairs feature i with feature i + D/2: "
                  "(0, {h}), (1, {h1}), … — the two layouts are the same rotations of a permuted vector, and "
                  "weights trained for one break in the other ({where})", h=half, h1=half + 1, where=_see_rope())
    if partners != want and float(leak.max()) > 1e-3:
        return tr("for D = {D} your function mixes features {b} with features {got}; rotate-half pairs feature i "
                  "with feature i + D/2: {b} with {want} ({where})", D=_D, b=_features(range(_D)),
                  got=_features(partners), want=_features(want), where=_see_rope())
    sign = torch.tensor([1.0] * half + [-1.0] * half, dtype=torch.float64)  # e_i -> +sin at i + D/2; e_(i+D/2) -> -sin
    cosines, sines = got[rows, :, rows], sign[:, None] * got[rows, :, torch.tensor(want)]  # (D, positions)
    if not same(cosines ** 2 + sines ** 2, torch.ones_like(cosines), atol=1e-3):
        return _not_a_rotation(got, cosines, half)
    return _angles_explain(torch.atan2(sines, cosines), half)


def _halves_of_positions(case: dict, got: torch.Tensor) -> bool:
    """Whether ``got`` is RoPE with rotate_half written over dim -2 (the positions) instead of the features."""
    x = case["x"].double()
    angle = case["positions"].double()[:, None] * _theta()
    angle = torch.cat((angle, angle), dim=-1)  # (L, D)
    first, second = x.chunk(2, dim=-2)
    return same(got, x * angle.cos() + torch.cat((-second, first), dim=-2) * angle.sin(), atol=1e-4)


def _swap_halves(x: torch.Tensor) -> torch.Tensor:
    first, second = x.chunk(2, dim=-1)
    return torch.cat((second, first), dim=-1)


def _rope_formula(case: dict, rotate) -> torch.Tensor:
    """x · cos + rotate(x) · sin with the right angles, in float64."""
    angle = case["positions"].double()[:, None] * _theta()
    angle = torch.cat((angle, angle), dim=-1)  # (L, D)
    x = case["x"].double()
    return x * angle.cos() + rotate(x) * angle.sin()


def _theta() -> torch.Tensor:
    return _BASE ** (-torch.arange(0, _D, 2, dtype=torch.float64) / _D)  # (D/2,)


def _not_a_rotation(got: torch.Tensor, cosines: torch.Tensor, half: int) -> str:
    """Features i and i + D/2 do not turn together: read each feature's own angle at position 1 from its cosine."""
    theta = _theta()
    own = torch.acos(cosines[:, 1].clamp(-1, 1))  # (D,): the angle of each feature at position 1
    if same(own, theta.repeat_interleave(2), atol=1e-4):
        return tr("features i and i + D/2 of your output turn by different angles: at position 1 they are {got}, the "
                  "frequencies repeat_interleave'd (θ0, θ0, θ1, θ1, …); in the rotate-half layout feature i and "
                  "feature i + D/2 form one pair and share angle i, so the D angles are the D/2 angles twice, "
                  "torch.cat((angle, angle), dim=-1): {want} ({where})", got=numbers(own),
                  want=numbers(torch.cat((theta, theta))), where=_see_rope())
    if not same(own[:half], own[half:], atol=1e-4):
        return tr("features i and i + D/2 of your output turn by different angles (at position 1: {got}): they form "
                  "one pair and share angle i, torch.cat((angle, angle), dim=-1): {want} ({where})",
                  got=numbers(own), want=numbers(torch.cat((theta, theta))), where=_see_rope())
    norms = got.norm(dim=-1)
    return tr("your output changes the length of the vectors (a unit vector comes out with length from {low:.3g} to "
              "{high:.3g}): RoPE only rotates each pair (i, i + D/2), out = x · cos + rotate_half(x) · sin, "
              "rotate_half([x1, x2]) = [-x2, x1] ({where})", low=float(norms.min()), high=float(norms.max()),
              where=_see_rope())


def _angles_explain(angles: torch.Tensor, half: int) -> str | None:
    positions = torch.tensor(_POSITIONS, dtype=torch.float64)
    theta = _theta()
    right = positions * torch.cat((theta, theta))[:, None]  # (D, positions)

    def turns(a: torch.Tensor, b: torch.Tensor) -> bool:
        return same(torch.stack((a.cos(), a.sin())), torch.stack((b.cos(), b.sin())), atol=1e-4)

    if turns(angles, -right):
        return tr("each pair of your output turns by −angle, the other way: check the sign in rotate_half "
                  "(rotate_half([x1, x2]) = [-x2, x1], the minus on the second half), or the sign of the angle, "
                  "+positions · θ ({where})", where=_see_rope())
    if turns(angles, math.pi / 2 - right):
        return tr("at position 0 your output is rotate_half(x), not x: cos and sin are swapped; out = x · cos + "
                  "rotate_half(x) · sin, so that angle 0 leaves x as it is ({where})", where=_see_rope())
    used = None
    for candidate in (positions, torch.arange(len(_POSITIONS), dtype=torch.float64), positions + 1):
        k = int(candidate.nonzero()[0])  # the first non-zero position: where each frequency is read
        freq = angles[:, k] / candidate[k]
        if turns(angles, candidate * freq[:, None]):
            used = candidate
            break
    if used is None:
        return tr("your angles are not position · frequency: at positions {given} feature 0 turns by {got} "
                  "({where})", given=list(_POSITIONS), got=numbers(angles[0]), where=_see_rope())
    if used is not positions:
        return tr("your angles are those of positions {used}, not of the positions given, {given}: use `positions` "
                  "as they are (a token decoded after a cache of T tokens is at position T, and position 0 is not "
                  "turned) ({where})", used=[int(p) for p in used], given=list(_POSITIONS), where=_see_rope())
    mine = freq[:half]
    if same(mine, theta, atol=1e-5):
        return None
    default = 10000.0 ** (-torch.arange(0, _D, 2, dtype=torch.float64) / _D)
    if same(mine, default, atol=1e-5):
        return tr("with base = {base:g} your frequencies are {got}, those of base 10000: use the `base` you are "
                  "given (SmolLM2's is 100000), θ_i = base^(-2i/D) ({where})", base=_BASE, got=numbers(mine),
                  where=_see_rope())
    text = tr("with D = {D} and base = {base:g} your pairs turn at {got} radians per position, where "
              "θ_i = base^(-2i/D) gives {want}", D=_D, base=_BASE, got=numbers(mine), want=numbers(theta))
    if bool((mine > 0).all()):
        exponents = [round(-math.log(float(f)) / math.log(_BASE), 4) + 0.0 for f in mine]
        text += tr("; your exponents are {got}, and 2i/D gives {want}", got=numbers(exponents),
                   want=numbers([2 * i / _D for i in range(half)]))
    return tr("{text} ({where})", text=text, where=_see_rope())


def _rope_shapes(gen: torch.Generator) -> list:
    return [{"x": torch.randn(*lead, 3, D, generator=gen), "positions": torch.tensor([2, 3, 4]), "base": 10000.0}
            for lead, D in (((), 8), ((2,), 8), ((1, 2), 8), ((1, 2), 2), ((2, 1), 16))]


ROPE_PROBES = (Probe("pairs_and_angles", _rope_inputs, _rope_explain), contrast("shapes", _rope_shapes))
