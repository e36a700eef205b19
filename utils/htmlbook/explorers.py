"""Explorers in the HTML edition: each one's precomputed grid as a block of plain HTML controls.

After a chapter's last cell the builder has the kernel render every explorer's grid
(:func:`utils.widgets.grid.render_grids`): ``manifest.json`` and one WebP per distinct figure, in a
folder named by the model id of the explorer's widget. :func:`precompute_explorers` then replaces each
explorer's widget view in the notebook with :func:`explorer_html`: native sliders, drop-downs, buttons
and checkboxes, the figure of the saved state, the grid as JSON, and a "precomputed" label.
``static/explorer.js`` swaps the figure as the reader moves a control (a slider stops only at its grid
values); with scripts off the block still shows the saved figure and says why the controls do not move.
"""

from __future__ import annotations

import html
import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat

from utils.htmlbook.chrome import CHROME

__all__ = ["WIDGET_STATE", "WIDGET_VIEW", "ExplorerReport", "explorer_html", "precompute_explorers",
           "prune_widget_state"]

WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


@dataclass
class ExplorerReport:
    """What :func:`precompute_explorers` did to one chapter: explorers made static, and those kept as
    saved widgets with the reason (their grid could not be rendered)."""

    precomputed: list[dict[str, Any]] = field(default_factory=list)  # model id, states, renders, render_s
    kept: list[tuple[str, str]] = field(default_factory=list)  # (model id, why)


def _control_html(index: int, control: dict[str, Any], uid: str) -> str:
    name = html.escape(control["description"])
    attrs = f'data-control="{index}" disabled'
    initial = control["initial"]
    if control["kind"] == "slider":
        low, high, step = control["track"]
        position = control["positions"][initial]
        return (f'<label class="explorer-control explorer-slider"><span>{name}</span>'
                f'<input type="range" min="{low:g}" max="{high:g}" step="{step:g}" value="{position:g}" {attrs}>'
                f'<output>{html.escape(control["labels"][initial])}</output></label>')
    if control["kind"] == "check":
        on = control["values"][initial] is True
        return (f'<label class="explorer-control explorer-check"><input type="checkbox"{" checked" if on else ""} '
                f'{attrs}><span>{name}</span></label>')
    if control["kind"] == "buttons":
        buttons = "".join(
            f'<label><input type="radio" name="{uid}-{index}" value="{i}"{" checked" if i == initial else ""} '
            f'{attrs}><span>{html.escape(label)}</span></label>' for i, label in enumerate(control["labels"]))
        return f'<fieldset class="explorer-control explorer-buttons"><legend>{name}</legend>{buttons}</fieldset>'
    options = "".join(f'<option value="{i}"{" selected" if i == initial else ""}>{html.escape(label)}</option>'
                      for i, label in enumerate(control["labels"]))
    return (f'<label class="explorer-control explorer-select"><span>{name}</span>'
            f'<select {attrs}>{options}</select></label>')


def explorer_html(manifest: dict[str, Any], image_href: str, uid: str,
                  kernel_links: Sequence[tuple[str, str]] = (), lang: str = "en") -> str:
    """The page block of one explorer from its ``manifest`` (see :func:`utils.widgets.grid.render_grid`).

    Args:
        manifest: the grid's manifest.
        image_href: the folder (relative to the page) that holds the manifest's images.
        uid: unique on the page (names the radio groups).
        kernel_links: ``(name, url)`` where a kernel runs the chapter (Binder, Colab): shown beside
            a text box that is offered as choices only.
        lang: the language of the block's own words (:data:`~utils.htmlbook.chrome.CHROME`).
    """
    words = CHROME[lang]
    controls = manifest["controls"]
    counts = [len(c["values"]) for c in controls]
    index = 0
    for control, count in zip(controls, counts):
        index = index * count + control["initial"]
    image, caption, _, disabled = manifest["states"][index]
    grid = {
        "controls": [{k: c[k] for k in ("kind", "labels", "positions", "values")} for c in controls],
        "states": manifest["states"], "captions": manifest["captions"],
        "images": [f"{image_href}/{name}" for name in manifest["images"]],
    }
    controls_html = "".join(_control_html(i, c, uid) for i, c in enumerate(controls))
    captions_html = "".join(f'<div class="explorer-caption">{text}</div>' for text in manifest["captions"][caption])
    note = ""
    if manifest.get("note") and any(c.get("free_text") for c in controls):
        links = " · ".join(f'<a href="{html.escape(url)}">{html.escape(name)}</a>' for name, url in kernel_links)
        note = (f'<p class="explorer-note">{html.escape(manifest["note"])}'
                f'{" " + links if links else ""}</p>')
    size = len(manifest["states"])
    stops = words.explorer_stops if any(c["kind"] == "slider" for c in controls) else ""
    about = words.explorer_about.format(states=size, stops=stops)
    data = json.dumps(grid, ensure_ascii=False).replace("</", "<\\/")
    return (
        f'<div class="course-explorer" id="{uid}" data-initial-state="{index}">'
        f'<div class="explorer-head"><span class="explorer-precomputed">{html.escape(words.precomputed)}</span>'
        f'<span class="explorer-about">{html.escape(about)}</span></div>'
        f'<div class="explorer-controls">{controls_html}</div>{note}'
        f'<div class="explorer-captions">{captions_html}</div>'
        f'<img class="explorer-figure" src="{html.escape(grid["images"][image])}" '
        f'alt="{html.escape(words.explorer_alt)}" data-state="{index}">'
        f'<noscript><p class="explorer-noscript">{html.escape(words.explorer_noscript)}</p></noscript>'
        f'<script type="application/json" class="explorer-grid">{data}</script></div>'
    )


def _references(value: Any) -> set[str]:
    if isinstance(value, str):
        return {value[len("IPY_MODEL_"):]} if value.startswith("IPY_MODEL_") else set()
    if isinstance(value, dict):
        return set().union(*(_references(v) for v in value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*(_references(v) for v in value)) if value else set()
    return set()


def prune_widget_state(nb: nbformat.NotebookNode) -> int:
    """Drop from the notebook's saved widget state every model no remaining widget view needs (the
    explorers made static); return how many were dropped."""
    store = nb.metadata.get("widgets", {}).get(WIDGET_STATE)
    if not store or not store.get("state"):
        return 0
    state = store["state"]
    roots = {out["data"][WIDGET_VIEW]["model_id"] for cell in nb.cells if cell.cell_type == "code"
             for out in cell.get("outputs", []) if WIDGET_VIEW in out.get("data", {})}
    keep, todo = set(), [r for r in roots if r in state]
    while todo:
        model = todo.pop()
        if model in keep or model not in state:
            continue
        keep.add(model)
        todo.extend(_references(state[model].get("state", {})))
    dropped = [m for m in state if m not in keep]
    for model in dropped:
        del state[model]
    if not state:
        del nb.metadata["widgets"]
    return len(dropped)


def precompute_explorers(nb: nbformat.NotebookNode, grids: Path, images_out: Path, image_href: str,
                         kernel_links: Sequence[tuple[str, str]] = (), lang: str = "en") -> ExplorerReport:
    """Replace, in place, every explorer view in ``nb`` whose grid is in ``grids`` with its page block.

    The grid's images are copied into ``images_out`` (shared by the chapter's explorers: identical
    figures are one file), which the page reaches as ``image_href``. An explorer whose manifest holds
    an error keeps its saved widget view and is listed in the report's ``kept``.
    """
    report = ExplorerReport()
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for i, output in enumerate(cell.get("outputs", [])):
            view = output.get("data", {}).get(WIDGET_VIEW)
            manifest_path = grids / view["model_id"] / "manifest.json" if view else None
            if manifest_path is None or not manifest_path.is_file():
                continue
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
            if "error" in manifest:
                report.kept.append((view["model_id"], manifest["error"]))
                continue
            images_out.mkdir(parents=True, exist_ok=True)
            for name in manifest["images"]:
                if not (images_out / name).exists():
                    shutil.copy2(manifest_path.parent / name, images_out / name)
            uid = f"explorer-{len(report.precomputed) + 1}"
            block = explorer_html(manifest, image_href, uid, kernel_links, lang)
            cell.outputs[i] = nbformat.v4.new_output("display_data", data={"text/html": block})
            report.precomputed.append({"model_id": view["model_id"], "states": len(manifest["states"]),
                                       "renders": manifest["renders"], "render_s": manifest["render_s"]})
    prune_widget_state(nb)
    return report
