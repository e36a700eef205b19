"""The parts of the static HTML edition that ``utils.html`` puts together.

* :mod:`utils.htmlbook.assets`: the JavaScript and CSS the pages load, copied next to them (offline);
* :mod:`utils.htmlbook.explorers`: an explorer's precomputed grid (``utils.widgets.grid``) as a page
  block whose script swaps the figure as the reader moves a control;
* :mod:`utils.htmlbook.cache`: the executed chapters and their explorers' grids, committed in
  ``html-cache/`` and executed again only when what they read changed;
* :mod:`utils.htmlbook.book`: what makes it read like a book (sidebar, previous and next links, the
  index page with the README's chapter table).
"""
