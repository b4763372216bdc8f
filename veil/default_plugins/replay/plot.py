"""``veil replay --plot FILE.png``: where each policy's prompt cache holds and where it breaks.

One row of panels per replayed file (the first ``max_files``), one panel per policy. Each panel
shows, per step, the prompt's tokens as a bar split into the part a prompt cache reuses from
the policy's previous prompt (dark) and the part sent uncached (light), with the budget as a
dashed line. A step whose bar is all light is a cache break; a policy that only appends shows
thin light tops on dark bars. Panels of a row share their y axis, so policies compare at a
glance.

matplotlib is imported lazily (Agg backend, no display needed); it is an optional dependency
(the ``plot`` extra). When it is missing, :func:`install_hint` says how to add it to the
environment veil runs from: a pipx or uv tool install, or a venv.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from veil import BadRequest, VeilError

MAX_FILES = 4
"""Files plotted by default (a row each)."""

CACHED_COLOR = "#1f4e79"
UNCACHED_COLOR = "#9ecae1"
BUDGET_COLOR = "#c0392b"


PIPX_MARKER = "pipx_metadata.json"
"""The file pipx writes at the root of each tool's venv (pipx's ``venv.py``)."""
UV_TOOL_MARKER = "uv-receipt.toml"
"""The file ``uv tool install`` writes at the root of each tool's environment (uv's tool receipt)."""


def install_hint(package: str = "matplotlib", prefix: str | Path | None = None) -> str:
    """The command that adds ``package`` to the environment veil runs from, for a message.

    - a pipx install (``pipx_metadata.json`` in ``prefix``): ``pipx inject NAME PACKAGE``, NAME
      the main package pipx recorded (the venv folder's name when unreadable);
    - a uv tool install (``uv-receipt.toml``): the ``uv tool install`` command veil was
      installed with, again with ``--reinstall`` and ``--with PACKAGE`` added (uv rebuilds a
      tool's environment from that command, so the earlier ``--with`` options must stay);
    - else pip: ``pip install PACKAGE`` when ``prefix`` is the active virtual environment
      (``VIRTUAL_ENV``), else ``<this interpreter> -m pip install PACKAGE`` so the package lands
      where veil runs, not in whatever ``pip`` is first on ``PATH``.

    Args:
        package: the distribution to install.
        prefix: the environment's root (default ``sys.prefix``).
    """
    root = Path(sys.prefix if prefix is None else prefix)
    if (root / PIPX_MARKER).is_file():
        name = root.name
        try:
            recorded = json.loads((root / PIPX_MARKER).read_text(encoding="utf-8"))
            name = str(recorded["main_package"]["package"]) or name
        except (OSError, ValueError, KeyError, TypeError):
            pass
        return f"pipx inject {name} {package}"
    if (root / UV_TOOL_MARKER).is_file():
        return (
            f"run the uv tool install command you installed veil with again, adding "
            f"--reinstall --with {package}"
        )
    active = os.environ.get("VIRTUAL_ENV")
    try:
        here = active is not None and Path(active).resolve() == root.resolve()
    except OSError:
        here = False
    if here:
        return f"pip install {package}"
    return f"{sys.executable} -m pip install {package}"


def matplotlib_missing(what: str) -> str:
    """``"WHAT: matplotlib is not installed (HINT)"``, HINT from :func:`install_hint`."""
    return f"{what}: matplotlib is not installed ({install_hint('matplotlib')})"


class PlotUnavailable(VeilError):
    """matplotlib is not installed."""

    code = "PLOT_UNAVAILABLE"
    http_status = 501


def plot_replay(result: dict[str, Any], path: str | Path, *, max_files: int = MAX_FILES) -> Path:
    """Draw prompt tokens and cached tokens per step for every policy of ``result``.

    Args:
        result: a replay result whose file entries carry ``per_step`` measures
            (:func:`veil.default_plugins.replay.report.run_replay` with ``per_step=True``).
        path: the image to write; its suffix picks the format (``.png``, ``.svg``, ``.pdf``).
        max_files: plot the first ``max_files`` files (at least 1).

    Returns:
        The path written.

    Raises:
        BadRequest: no file in ``result``, no per-step measures, or ``max_files`` < 1.
        PlotUnavailable: matplotlib is not installed.
        OSError: the image cannot be written.
    """
    if max_files < 1:
        raise BadRequest(f"max_files: expected at least 1, got {max_files}")
    files = result.get("files") or []
    if not files:
        raise BadRequest("plot: the replay has no file to plot")
    from veil.default_plugins.replay.report import DISPLAY_ORDER

    names = [n for n in DISPLAY_ORDER if n in files[0]]
    if not names or "per_step" not in files[0][names[0]]:
        raise BadRequest("plot: the replay result has no per-step measures (per_step=True)")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch
    except ImportError as exc:
        raise PlotUnavailable(matplotlib_missing("plot")) from exc

    shown = files[:max_files]
    budget = result.get("budget")
    price = result.get("cache_price")
    rows, cols = len(shown), len(names)
    fig, axes = plt.subplots(
        rows,
        cols,
        figsize=(3.3 * cols + 0.6, 2.6 * rows + 1.2),
        sharex="row",
        sharey="row",
        squeeze=False,
    )
    for r, entry in enumerate(shown):
        for c, name in enumerate(names):
            ax = axes[r][c]
            policy = entry[name]
            steps = policy["per_step"]
            x = list(range(len(steps)))
            cached = [s["cached_tokens"] for s in steps]
            uncached = [s["prompt_tokens"] - s["cached_tokens"] for s in steps]
            ax.bar(x, cached, width=1.0, color=CACHED_COLOR, linewidth=0)
            ax.bar(x, uncached, bottom=cached, width=1.0, color=UNCACHED_COLOR, linewidth=0)
            if budget:
                ax.axhline(budget, color=BUDGET_COLOR, linestyle="--", linewidth=1)
            raw = policy["prompt_tokens"]
            share = 100 * policy["cached_tokens"] / raw if raw else 0.0
            ax.set_title(
                f"{name}\n{raw / 1000:,.0f}k tokens, {share:.0f}% cached, "
                f"{policy['misses']} misses",
                fontsize=9,
            )
            ax.tick_params(labelsize=8)
            ax.grid(axis="y", alpha=0.3)
            if r == rows - 1:
                ax.set_xlabel("step", fontsize=9)
            if c == 0:
                ax.set_ylabel(f"{Path(entry['file']).name}\nprompt tokens", fontsize=9)
    handles = [
        Patch(color=CACHED_COLOR, label="cached (same leading messages as the previous step)"),
        Patch(color=UNCACHED_COLOR, label="uncached"),
    ]
    if budget:
        handles.append(
            plt.Line2D([], [], color=BUDGET_COLOR, linestyle="--", label=f"budget {budget:,}")
        )
    legend_room = 0.5 / fig.get_figheight()  # inches kept free under the panels, as a fraction
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=9, frameon=False)
    title = "Prompt tokens per step and the part a prompt cache reuses"
    if price is not None:
        title += f" (cached input priced at {price}x)"
    fig.suptitle(title, fontsize=11)
    fig.tight_layout(rect=(0, legend_room, 1, 1))
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
