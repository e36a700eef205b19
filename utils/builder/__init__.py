"""The steps of ``python -m utils.build`` (see :mod:`utils.build`, the command line and public names).

One module per step, in the order a build runs them:

=====================  ===============================================================================
``config``             ``[tool.course]`` -> :class:`CourseConfig` and the badge line
``setup_cell.py``      the setup cell's template, as real code (read as text, never imported)
``stamps``             stamps the badges and the setup cell into a notebook
``strip``              validates an exercise cell and strips its solution
``chapter``            one solution -> its chapter, as a sequence of small steps (:data:`STEPS`)
``course``             every notebook: render all, write what changed, the edited-chapter guard
``translate``          English solution + catalogue -> ``solutions/zh/`` and ``chapters/zh/``
``execution``          ``--execute``: run solutions in place and store their outputs
``cli``                the command line (``utils/build.py`` runs it)
``nbgrader``           ``--nbgrader DIR``: the course as an nbgrader source folder
``gradescope_bundle``  ``python -m utils.grade gradescope-bundle``: the Gradescope autograder zip
``nbgrader_hook``      copied into an nbgrader export: runs the course's judge after nbgrader's kernel
=====================  ===============================================================================

What the builder shares with the translations (the chapter glob, the badge markers, reading a source
notebook, :class:`BuildError`) is :mod:`utils.notebook_files`; the builder imports :mod:`utils.i18n`
and :mod:`utils.grading`, neither imports the builder.
"""
