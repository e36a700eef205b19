"""The instructor grader: ``python -m utils.grade SUBMISSIONS`` (:mod:`utils.grade`, :mod:`utils.grading.cli`).

Its modules, on either side of the trust boundary. The sandboxed worker imports this package, so this
file imports nothing: the trusted side is never loaded where student code runs
(``tests/test_grader_boundary.py``).

**Worker side** (loaded in the sandbox; ``serialize`` and ``files`` are used by both sides):

=============  ==============================================================================================
``worker``     the untrusted half: runs one student's exercise cells, one forked process per cell
``jail``       private mounts for one worker: a script run as root in its mount namespace, then ``exec``
``forkserver`` imports torch once per grader; forks each worker and isolates it (started by ``forks``)
``serialize``  values across the boundary: JSON plus ``.npy`` files, never pickle, read back as hostile
``files``      reading and removing what learner code touched, every path hostile (``O_NOFOLLOW``, ``fstat``)
=============  ==============================================================================================

**Trusted side** (the grader's own process; never imported by the worker):

======================  ===========================================================================================
``cli``                 the command line, ``python -m utils.grade SUBMISSIONS [--out DIR] ...``, over ``batch``
``batch``               :func:`~utils.grading.batch.grade`: a folder of submissions -> rows and the reports
``intake``              submissions as they arrive (folders, zips, a Canvas download) -> students, unplaced entries
``course``              reading notebooks: the course's exercise list and points, a student's exercise cells
``manifest``            the exercise list as package data (``exercises.json``), for a grader without ``solutions/``
``engine``              plans the batch and runs every student's unit in sandboxed workers, in parallel
``copies``              which copy of a chapter is graded when a student hands it in twice (the one tie rule)
``unit``                one student's unit: each cell sent when due, the sandbox stopped, its outputs judged here
``sandbox``             starts, watches and kills the sandboxed workers; the isolation levels
``forks``               the fork server's grader side: starts it once per process, watches the workers it forks
``isolation``           which isolation this machine allows, probed once per process; the workers' command line
``report``              ``results.csv``, ``grades.csv``, ``feedback/`` and the summary, written atomically
``lms``                 a roster mapping submissions to LMS identities, and Canvas's gradebook CSV
``gradescope``          Gradescope's runner: one submission -> ``results/results.json``
``gradescope_results``  what ``results.json`` shows students before and after publication
``kit``                 the worker kit: the worker-side modules copied apart, so the sandbox sees no reference
``memory``              one memory bound per student: cgroup v2, cgroup v1, or a watchdog summing its processes
``verdicts``            the fixed status and message of a run that raised, exited or crashed (nothing of its own)
``course_secret``       nbgrader's per-course secret seed, written once at export, mode 0600
``nbgrader_judge``      nbgrader's judge: grades a submitted notebook with the grader, outside the student's kernel
======================  ===========================================================================================

The Gradescope autograder zip is written by :mod:`utils.builder.gradescope_bundle`: the builder imports
the grader, never the other way round.
"""
