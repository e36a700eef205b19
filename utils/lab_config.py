"""What ``make lab`` hands JupyterLab so that a learner's first screen holds the course and nothing else.

Everything lives in the work folder's ``.course-lab/`` (hidden in JupyterLab's file browser), so the
learner's own Jupyter settings are never edited and each work folder (each clone) has its own:

- :func:`lab_settings`: an application-settings folder whose ``overrides.json`` turns Jupyter's news
  question and update check off and, for ``make lab-zh``, selects the Chinese language pack. An
  override is a setting's default: a choice the learner makes in Settings still wins.
- :func:`workspaces_dir`: JupyterLab's workspaces (which tabs are open), one set per work folder, so a
  fresh clone does not reopen the tabs an earlier clone left open.
- :func:`trust_course_notebooks`: the course's own notebooks in the work folder are marked trusted in
  Jupyter's signature database (the notebooks are not modified), so opening one never logs
  "Notebook ... is not trusted". A notebook whose content is not the course's is left as it is.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from utils.notebook_files import NOTEBOOK_GLOB

__all__ = ["LAB_SETTINGS", "NOTIFICATION_PLUGIN", "QUIET", "TRANSLATION_PLUGIN", "default_app_settings_dir",
           "lab_settings", "trust_course_notebooks", "workspaces_dir"]

LAB_SETTINGS = ".course-lab"
"""The folder, inside the work folder, holding the run's settings and workspaces."""
TRANSLATION_PLUGIN = "@jupyterlab/translation-extension:plugin"
"""The JupyterLab setting that holds the interface's locale."""
NOTIFICATION_PLUGIN = "@jupyterlab/apputils-extension:notification"
"""The JupyterLab setting that asks about Jupyter's news and checks for a newer JupyterLab."""
QUIET = {NOTIFICATION_PLUGIN: {"fetchNews": "false", "checkForUpdates": False}}
"""The overrides every run gets: no "Would you like to get notified about official Jupyter news?" and
no "A newer version is available" (the course pins its JupyterLab in constraints.txt)."""


def default_app_settings_dir() -> Path:
    """JupyterLab's own application-settings folder (``<app dir>/settings``), whose overrides we keep."""
    from jupyterlab.commands import get_app_dir

    return Path(get_app_dir()) / "settings"


def lab_settings(folder: str | Path, locale: str | None = None, app_settings: str | Path | None = None) -> Path:
    """Write an application-settings folder in ``folder`` for this run (module docstring); return it.

    Its ``overrides.json`` is JupyterLab's own (from ``app_settings``, default
    :func:`default_app_settings_dir`, when there is one) with :data:`QUIET` and, when ``locale`` is
    given, the translation setting's ``locale``; its ``page_config.json`` is copied, and ``static``
    (where JupyterLab reads the build's metadata) is linked beside it, so that nothing else changes.
    Passed as ``--LabApp.app_settings_dir``.

    >>> import tempfile
    >>> settings = lab_settings(tempfile.mkdtemp(), "zh_CN", app_settings=tempfile.mkdtemp())
    >>> sorted(json.loads((settings / "overrides.json").read_text()).items())  # doctest: +NORMALIZE_WHITESPACE
    [('@jupyterlab/apputils-extension:notification', {'checkForUpdates': False, 'fetchNews': 'false'}),
     ('@jupyterlab/translation-extension:plugin', {'locale': 'zh_CN'})]
    """
    app_settings = Path(app_settings) if app_settings is not None else default_app_settings_dir()
    settings = Path(folder) / "settings"
    settings.mkdir(parents=True, exist_ok=True)
    overrides = {}
    if (app_settings / "overrides.json").is_file():
        overrides = json.loads((app_settings / "overrides.json").read_text(encoding="utf-8"))
    for plugin, values in QUIET.items():
        overrides.setdefault(plugin, {}).update(values)
    if locale is not None:
        overrides.setdefault(TRANSLATION_PLUGIN, {})["locale"] = locale
    (settings / "overrides.json").write_text(json.dumps(overrides, indent=1, sort_keys=True) + "\n",
                                             encoding="utf-8")
    if (app_settings / "page_config.json").is_file():
        (settings / "page_config.json").write_bytes((app_settings / "page_config.json").read_bytes())
    static, link = app_settings.parent / "static", Path(folder) / "static"
    if link.is_symlink():  # a venv rebuilt elsewhere since the last run
        link.unlink()
    if static.is_dir() and not link.exists():
        link.symlink_to(static, target_is_directory=True)
    return settings


def workspaces_dir(work: str | Path) -> Path:
    """The folder of JupyterLab's workspaces for the work folder ``work`` (``--LabApp.workspaces_dir``)."""
    folder = Path(work) / LAB_SETTINGS / "workspaces"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def trust_course_notebooks(work: str | Path, chapters: str | Path, notary=None) -> list[str]:
    """Mark trusted each notebook in ``work`` whose bytes are those of a notebook in ``chapters``.

    A copy the learner has edited and saved in JupyterLab was signed by JupyterLab when it was saved;
    anything else is left untrusted. Returns the names signed now (those already trusted are skipped).

    Args:
        work: the learner's work folder.
        chapters: the course's notebooks (``chapters/`` or ``chapters/zh/``).
        notary: an ``nbformat.sign.NotebookNotary``; default: Jupyter's own (``JUPYTER_DATA_DIR``).
    """
    import nbformat
    from nbformat.sign import NotebookNotary

    course = {_digest(path) for path in Path(chapters).glob(NOTEBOOK_GLOB)}
    notary = notary if notary is not None else NotebookNotary()  # it makes Jupyter's data folder if need be
    signed = []
    for path in sorted(Path(work).glob("*.ipynb")):
        if _digest(path) not in course:
            continue
        notebook = nbformat.read(path, as_version=4)  # as the server reads it, so the signatures agree
        if not notary.check_signature(notebook):
            notary.sign(notebook)
            signed.append(path.name)
    return signed
