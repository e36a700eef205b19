"""The explorer and the quiz of chapter 1, "Queries, keys and values". See :mod:`utils.widgets`.

* :func:`qkv_explorer` wires the pure state function :func:`utils.explorers.qkv.qkv_explorer_scores`
  and the figure :func:`utils.plotting.qkv.query_scores_figure` to ipywidgets: pick a query token,
  toggle projections, vary d_k;
* :func:`ch1_quiz` is the closing quiz.
"""

from __future__ import annotations

from utils.explorers.qkv import QKVScores, qkv_explorer_scores
from utils.i18n.messages import tr
from utils.plotting.qkv import query_scores_figure
from utils.vocab import toy_sentence
from utils.widgets.common import Explorer, powers_of_two, wire_explorer
from utils.widgets.quiz import Choice, Numeric, Quiz

__all__ = ["qkv_explorer", "ch1_quiz"]


def _title(tokens: list[str], result: QKVScores, query_index: int, projected: bool, d_k: int) -> str:
    row = result.scores[query_index]
    top = int(row.argmax())
    kind = tr("Q Kᵀ, random W_Q ≠ W_K, D_k = {d_k}", d_k=d_k) if projected else tr("X Xᵀ, no projection")
    symmetry = tr("symmetric") if result.symmetric else tr("not symmetric")
    return tr("{kind}: '{query}' scores highest on '{key}'; matrix {symmetry}, score std {std:.2f}", kind=kind,
              query=tokens[query_index], key=tokens[top], symmetry=symmetry, std=result.spread)


def qkv_explorer(sentence: str = "pronoun", d_model: int = 16, *, seed: int = 0) -> Explorer:
    """An explorer: choose a query token and see its scores against every key.

    Controls: the query token, "no projection" (X Xᵀ) vs "random projections" (Q Kᵀ), D_k, and the seed
    of the random W_Q, W_K. The figure is :func:`utils.plotting.qkv.query_scores_figure`.

    Args:
        sentence: a key of :data:`utils.vocab.SENTENCES` or any text. Default: ``"pronoun"``.
        d_model: E. Default: ``16``.
        seed: the embedding table's seed. Default: ``0``.

    Returns:
        An :class:`~utils.widgets.common.Explorer` (see :func:`~utils.widgets.common.wire_explorer`): the
        controls, then an ``Output`` with the figure. ``controls`` names them ``query``, ``mode``, ``d_k``
        and ``w_seed``; ``state`` is the :class:`~utils.explorers.qkv.QKVScores` drawn last.
    """
    import ipywidgets as w

    tokens, x = toy_sentence(sentence, d_model, seed=seed)
    start = tokens.index("it") if "it" in tokens else 0
    query = w.Dropdown(options=[(f"{i}: {t}", i) for i, t in enumerate(tokens)], value=start,
                       description=tr("query token"))
    mode = w.ToggleButtons(options=[(tr("no projection: X Xᵀ"), False), (tr("random projections: Q Kᵀ"), True)],
                           value=False, description=tr("scores"))
    d_k = w.SelectionSlider(options=list(powers_of_two(1, 64)), value=8, description="D_k", disabled=True)
    w_seed = w.IntSlider(value=0, min=0, max=9, description=tr("W seed"), disabled=True)

    def compute() -> QKVScores:
        d_k.disabled = w_seed.disabled = not mode.value
        return qkv_explorer_scores(x, projected=mode.value, d_k=d_k.value, seed=2 * w_seed.value)

    def draw(result: QKVScores):
        return query_scores_figure(tokens, result.scores, query.value,
                                   title=_title(tokens, result, query.value, mode.value, d_k.value))

    return wire_explorer([w.HBox([query, mode]), w.HBox([d_k, w_seed])],
                         {"query": query, "mode": mode, "d_k": d_k, "w_seed": w_seed}, compute, draw,
                         grid={"query": (0, 1, 4, 5, 7, 10), "d_k": (1, 8, 64), "w_seed": (0, 1)})  # static states


def ch1_quiz() -> Quiz:
    """The closing quiz of chapter 1: shapes, nn.Linear, symmetry, and how the scores grow with L."""
    return Quiz([
        Choice(
            tr("x has shape (N, L, E) = (2, 5, 16) and W_K has shape (16, 8). What is the shape of K = x @ W_K?"),
            ["(2, 5, 8)", "(2, 8, 5)", "(5, 8)", "(2, 5, 16)"],
            answer=0,
            feedback=[
                tr("Right: @ contracts E and leaves the batch and length dims alone."),
                tr("The token axis L stays where it was; only the last dim changes from E to D_k."),
                tr("The batch dimension N = 2 is kept: matmul broadcasts over leading dims."),
                tr("E = 16 is the input size; after the projection the last dim is D_k = 8."),
            ],
            explanation=tr("Every token is projected on its own, with the same W_K."),
        ),
        Choice(
            tr("lin = nn.Linear(16, 8). Which expression equals lin(x) for x of shape (L, 16)?"),
            ["x @ lin.weight + lin.bias", "x @ lin.weight.T + lin.bias", "x @ lin.weight.T",
             "lin.weight @ x + lin.bias"],
            answer=1,
            feedback=[
                tr("lin.weight has shape (8, 16), (out, in): x @ lin.weight does not even multiply."),
                tr("Right: nn.Linear stores W transposed, (out, in), and adds a bias."),
                tr("Close, but nn.Linear adds a bias unless you pass bias=False."),
                tr("That is the column-vector convention: with x of shape (L, 16) the shapes do not line up."),
            ],
            explanation=tr("So W_Q of the maths is lin.weight.T, and the projection has a bias too."),
        ),
        Choice(
            tr("Without projections the scores are S = X Xᵀ. Which statement is true?"),
            [tr("S[i, j] = S[j, i] for every pair, and a token's score with itself is usually its largest"),
             tr("S is symmetric only if the sentence is a palindrome"),
             tr("S[i, i] is always exactly the largest entry of row i"),
             tr("S is a probability matrix: its rows sum to 1")],
            answer=0,
            feedback=[
                tr("Right: x_i · x_j = x_j · x_i, and x_i · x_i = |x_i|² is large for long random vectors."),
                tr("The order of the tokens does not matter: the dot product itself is symmetric."),
                tr("Usually, not always: a longer vector x_j can beat |x_i|² (the Myth check shows it)."),
                tr("Those are the weights after the softmax; the scores are raw dot products of any sign."),
            ],
            explanation=tr("Separate W_Q and W_K break both: 'it' can score 'animal' higher than 'animal' "
                           "scores 'it'."),
        ),
        Choice(
            tr("With projections, scores[i, j] = (x_i W_Q) · (x_j W_K). When is scores[i, j] == scores[j, i] "
               "for all x?"),
            [tr("Always: a dot product is symmetric"), tr("When W_Q W_Kᵀ is a symmetric matrix, e.g. W_Q = W_K"),
             tr("Never"), tr("Only when D_k = E")],
            answer=1,
            feedback=[
                tr("The dot product is symmetric, but it compares x_i W_Q with x_j W_K: two different maps."),
                tr("Right: scores = X (W_Q W_Kᵀ) Xᵀ, which is symmetric exactly when W_Q W_Kᵀ is."),
                tr("It can be: tie W_K to W_Q and the scores are symmetric again."),
                tr("D_k changes the shapes, not the symmetry."),
            ],
            explanation=tr("Two separate matrices let a query ask for something different from what a key offers."),
        ),
        Numeric(
            tr("A batch of N = 4 sentences, each with L = S = 10 tokens. How many scores does Q Kᵀ hold in all?"),
            answer=400,
            explanation=tr("(N, L, S) = (4, 10, 10): the scores grow with the square of the length."),
            hint=tr("One score per (sentence, query, key) triple."),
        ),
    ], title=tr("Chapter 1 quiz"))
