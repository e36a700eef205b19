"""Benchmarks that report every figure as a ratio against the PyTorch built-in, measured in the same run.

Usage::

    python -m utils.benchmark attention            # N=8, L=512, E=512, H=8 (takes a minute on 2 cores)
    python -m utils.benchmark attention --quick    # tiny sizes, a few seconds
    python -m utils.benchmark memory               # peak memory vs L, 1k..16k, H=8, D=64 (about 2 minutes)
    python -m utils.benchmark memory --mode backward  # forward + backward: SDPA, recomputing, autograd loop
    python -m utils.benchmark grader               # utils.grading.grade vs running the notebooks (minutes)
    python -m utils.benchmark                      # every subcommand with its defaults

One module per subcommand, each with its measurement, its table and its ``add_<name>_command``:

=================================  =============================================================================
``utils.benchmark.attention``      ``MultiHeadAttention`` (fast and explicit) and the encoder layer
``utils.benchmark.memory``         peak memory against L: naive, SDPA and tiled attention (forward or backward)
``utils.benchmark.grader``         ``utils.grading.grade`` against running the notebooks
``utils.benchmark.common``         round-robin timing, ratio rows, the environment line, the table
``utils.benchmark.cli``            the command line (``python -m utils.benchmark``)
=================================  =============================================================================

Method: each candidate and its baseline are timed round-robin (one call of each per repetition, so
drift on a busy machine hits both), after ``warmup`` untimed calls. A row reports the median of the
per-repetition ratios ``candidate / baseline`` and their min-max spread, plus the baseline's median time.
The thread count (``torch.set_num_threads``) is set and printed.

``memory`` runs each configuration in a fresh Python process (``subprocess``) and reads its peak
resident memory (``VmHWM`` in ``/proc/self/status``) after resetting it once the inputs exist, so a
row is the growth *above the inputs*. On a CUDA device it reports ``torch.cuda.max_memory_allocated``
instead, plus the SDPA backend that torch chose.

Adding a subcommand: write a module with ``add_<name>_command(subparsers)``, which registers a parser
with ``set_defaults(run=<function taking the parsed args>)``, and append it to
:data:`utils.benchmark.cli.SUBCOMMANDS`.
"""
