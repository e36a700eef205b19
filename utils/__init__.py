"""Attention, Step by Step: the package behind every chapter.

Modules mirror the course:

==========================  ======================================================  ========
module                      what lives there                                        chapters
==========================  ======================================================  ========
``utils.attention``         scaled dot-product attention, masks, multi-head         1, 2, 3
``utils.tiled_attention``   online softmax, tiled (memory-light) attention          6
``utils.tiled_backward``    FlashAttention-2's recomputing backward pass            6
``utils.scaling``           why the scores are divided by sqrt(D): measurements     2
``utils.heads``             hand-built heads; how alike heads' attention maps are   3, 5
``utils.positional``        sinusoidal, learned and rotary position encodings       4
``utils.layers``            feed-forward, encoder layer, tiny token classifier      5
``utils.at_scale``          naive attention, window masks, KV-cache decoder         6
``utils.tasks``             synthetic datasets made in code (no downloads)          5, 6
``utils.training``          the training loop and measurements on a trained model   5
``utils.llm``               SmolLM2 read offline: GQA, rotate-half RoPE, sinks      7
``utils.device``            ``get_device`` and seeding                              all
``utils.notebook_setup``    ``setup()``: what every notebook's setup cell calls    all
``utils.explorers``         each explorer's state and pure functions                all
``utils.plotting``          every figure a chapter shows                            all
``utils.widgets``           explorers' controls, and quizzes                        all
``utils.exercises``         one definition per exercise; the check-cell API         all
``utils.build``             solutions/ -> chapters/                                 -
``utils.grading``           the instructor grader (``python -m utils.grade``)       -
``utils.benchmark``         ratios against the PyTorch built-ins, one module each   3, 6
==========================  ======================================================  ========

Layers, one way down. A module imports only from its own layer and the layers to its left, by any kind
of import: module-level, function-local, ``TYPE_CHECKING``, ``importlib.import_module("...")``.
``tests/test_package_layout.py`` reads the drawing and the table below and checks every import::

    core ──▶ explorers ──▶ plotting ──▶ widgets ──▶ exercises ──▶ tools

A name in the table covers that module and, when it is a package (``utils`` itself excepted), every
module in it; the longest name that covers a module gives its layer. A new module that no name covers
fails the test until it gets a row.

==========  ===========================  ===================================================================
layer       modules                      why there
==========  ===========================  ===================================================================
core        ``utils``                    the package: ``setup``, ``get_device``
core        ``utils._checks``            argument validation and its messages
core        ``utils._proc``              a process's peak memory
core        ``utils._text``              monospace text tables that count a wide character as two columns
core        ``utils._tiles``             the blocks that the tiled forward and backward both cut
core        ``utils.at_scale``           the chapters' computing, one module per topic (table above)
core        ``utils.attention``
core        ``utils.decoder``
core        ``utils.device``
core        ``utils.heads``
core        ``utils.kv_cache``
core        ``utils.layers``
core        ``utils.llm``                chapter 7: SmolLM2 read offline with the course's own decoder
core        ``utils.notebook_setup``
core        ``utils.paths``              the repository root
core        ``utils.positional``
core        ``utils.scaling``
core        ``utils.tasks``
core        ``utils.tiled_attention``
core        ``utils.tiled_backward``
core        ``utils.training``
core        ``utils.vocab``
core        ``utils.i18n.messages``      ``tr()``: every layer's learner-facing text (the rest of i18n is a tool)
core        ``utils.i18n.pofile``        the ``.po`` reader that ``tr()`` loads its catalogues with
explorers   ``utils.explorers``          an explorer's state and pure functions: no widgets, no figures
plotting    ``utils.plotting``           figure functions: numbers or an explorer state in, a ``Figure`` out
widgets     ``utils.widgets``            controls wired to an explorer and a figure; the quizzes
exercises   ``utils.exercises``          one definition per exercise; the check cell
tools       ``utils.benchmark``          ``python -m utils.benchmark``
tools       ``utils.build``              ``python -m utils.build`` and its steps
tools       ``utils.builder``
tools       ``utils.grade``              ``python -m utils.grade``: the instructor's grader
tools       ``utils.grading``
tools       ``utils.html``               the HTML edition
tools       ``utils.htmlbook``
tools       ``utils.i18n``               catalogues, extraction, the Chinese notebooks and README
tools       ``utils.lab``                ``make lab``
tools       ``utils.lab_config``         JupyterLab's settings, workspaces, trusted notebooks (``make lab``)
tools       ``utils.workspace``          the work folder ``make lab`` syncs; reads the builder's chapter list
tools       ``utils.notebook_run``       runs a notebook, for the builder, the HTML edition and the benchmark
tools       ``utils.prereqs``            a Makefile script, standard library only
tools       ``utils.files``              writes a generated file only when it changes
tools       ``utils.notebook_files``     the notebook files that the builder and the translations both read
==========  ===========================  ===================================================================
"""

__all__ = ["COURSE", "get_device", "seed_everything", "setup"]
__version__ = "0.1.0"

# The package's names are loaded on first use (PEP 562), so that ``import utils.lab`` (``make lab``) and
# the other tools do not pay for torch: a notebook's ``utils.setup(...)`` imports it then.
def __getattr__(name: str):
    if name in ("get_device", "seed_everything"):
        from utils import device as module
    elif name in ("COURSE", "setup"):
        from utils import notebook_setup as module
    else:
        raise AttributeError(f"module 'utils' has no attribute {name!r}")
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
