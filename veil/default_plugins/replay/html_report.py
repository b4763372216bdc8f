"""``veil replay --report DIR``: one HTML page and one PNG a person reads.

``DIR/index.html`` shows, in total and per session, what each policy would have cost: prompt
tokens, the part a prompt cache reuses, effective tokens (uncached + cache price x cached, the
replay's ``effective_tokens``) and, given a price per million input tokens, dollars
(effective tokens x price / 1,000,000: cached input is billed at the cache price's share of
it), then misses, references, steps over the budget and evictions. Each session has a per-step
chart of effective tokens per policy (inline SVG, drawn here: a few polylines need no
library), and what the reader skipped or could not pair in its log. ``DIR/replay.png``
(matplotlib, the ``plot`` extra) draws the totals as bars and the per-step cost of the first
sessions, and the page shows it.

The page is self-contained (no script, no network): every value from a recording (file
names, record types) is HTML-escaped. Both files are written atomically (a temporary file in
``DIR``, then renamed), so a page is never seen half-written.
"""

from __future__ import annotations

import html
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from veil import BadRequest
from veil.default_plugins.replay.cache import effective_tokens

PAGE = "index.html"
"""The page's file name in the report folder."""
CHART = "replay.png"
"""The PNG's file name in the report folder."""
CHART_SESSIONS = 6
"""Sessions drawn per step in the PNG (the first ones; the page charts every session)."""

# One colour per policy, the same on the page and in the PNG (matplotlib's tab10 colours).
POLICY_COLORS = {
    "veil": "#d62728",
    "full": "#7f7f7f",
    "masking": "#1f77b4",
    "masking-budget": "#17becf",
    "masking-blocks": "#9467bd",
    "recency": "#2ca02c",
    "recency-hysteresis": "#bcbd22",
}


def dollars(effective: float, price_per_mtok: float | None) -> float | None:
    """What ``effective`` effective tokens cost at ``price_per_mtok`` dollars per million
    uncached input tokens; None without a price."""
    if price_per_mtok is None:
        return None
    return effective * price_per_mtok / 1_000_000


def format_dollars(value: float | None) -> str:
    """``$1,234.56`` (cents; four decimals under a dollar); "-" for None."""
    if value is None:
        return "-"
    return f"${value:,.2f}" if value >= 1 else f"${value:,.4f}"


def step_costs(policy: dict[str, Any], cache_price: float) -> list[float]:
    """Effective tokens of each step of one policy of one file (its ``per_step`` measures)."""
    return [
        effective_tokens(s["prompt_tokens"], s["cached_tokens"], cache_price)
        for s in policy.get("per_step") or []
    ]


def _policies(entry: dict[str, Any]) -> list[str]:
    from veil.default_plugins.replay.report import DISPLAY_ORDER

    return [n for n in DISPLAY_ORDER if isinstance(entry.get(n), dict)]


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _ratio(value: float, reference: float | None) -> str:
    return f"{value / reference:.3f}" if reference else "-"


def _policy_rows(
    entry: dict[str, Any], names: Sequence[str], price: float | None, table_id: str
) -> str:
    full = entry.get("full")
    full_eff = full["effective_tokens"] if isinstance(full, dict) else None
    head = (
        "<tr><th>policy</th><th>prompt tokens</th><th>cached</th><th>effective tokens</th>"
        "<th>/ full</th><th>dollars</th><th>misses</th><th>references</th>"
        "<th>steps over budget</th><th>evictions</th></tr>"
    )
    rows = []
    for name in names:
        p = entry[name]
        raw, cached, eff = p["prompt_tokens"], p["cached_tokens"], p["effective_tokens"]
        share = f"{100 * cached / raw:.1f}%" if raw else "-"
        rows.append(
            f'<tr data-policy="{_esc(name)}">'
            f'<td class="policy"><span class="swatch" style="background:'
            f'{POLICY_COLORS.get(name, "#000")}"></span>{_esc(name)}</td>'
            f'<td class="num" data-key="prompt_tokens">{raw:,}</td>'
            f'<td class="num" data-key="cached_share">{share}</td>'
            f'<td class="num" data-key="effective_tokens">{eff:,.0f}</td>'
            f'<td class="num">{_ratio(eff, full_eff)}</td>'
            f'<td class="num" data-key="dollars">{format_dollars(dollars(eff, price))}</td>'
            f'<td class="num" data-key="misses">{p["misses"]:,}</td>'
            f'<td class="num">{p["references"]:,}</td>'
            f'<td class="num">{p["over_budget_steps"]:,}</td>'
            f'<td class="num">{format(p["evictions"], ",") if "evictions" in p else ""}</td>'
            "</tr>"
        )
    return (
        f'<table id="{_esc(table_id)}"><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table>'
    )


def svg_chart(series: dict[str, list[float]], *, width: int = 720, height: int = 220) -> str:
    """A line chart of per-step values, one polyline per policy, as inline SVG.

    Args:
        series: policy name -> one value per step (effective tokens).
        width, height: the drawing's size in CSS pixels.

    Returns:
        An ``<svg>`` element with axes, the largest value and the step count as labels, and a
        ``<polyline data-policy=NAME>`` per policy ("" when there is no step to draw).
    """
    steps = max((len(v) for v in series.values()), default=0)
    if steps == 0:
        return ""
    top = max((max(v) for v in series.values() if v), default=0.0) or 1.0
    left, right, above, below = 64, 12, 12, 28
    plot_w, plot_h = width - left - right, height - above - below

    def x(i: int) -> float:
        return left + (plot_w * i / (steps - 1) if steps > 1 else plot_w / 2)

    def y(v: float) -> float:
        return above + plot_h * (1 - v / top)

    parts = [
        f'<svg class="chart" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        'role="img" aria-label="effective tokens per step, one line per policy">',
        f'<line x1="{left}" y1="{above + plot_h}" x2="{left + plot_w}" y2="{above + plot_h}" '
        'stroke="#555"/>',
        f'<line x1="{left}" y1="{above}" x2="{left}" y2="{above + plot_h}" stroke="#555"/>',
        f'<text x="{left - 6}" y="{above + 4}" text-anchor="end" class="axis">{top:,.0f}</text>',
        f'<text x="{left - 6}" y="{above + plot_h}" text-anchor="end" class="axis">0</text>',
        f'<text x="{left + plot_w}" y="{height - 8}" text-anchor="end" class="axis">'
        f"step {steps - 1}</text>",
        f'<text x="{left}" y="{height - 8}" class="axis">step 0</text>',
    ]
    for name, values in series.items():
        if not values:
            continue
        points = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(values))
        parts.append(
            f'<polyline data-policy="{_esc(name)}" fill="none" stroke-width="1.5" '
            f'stroke="{POLICY_COLORS.get(name, "#000")}" points="{points}"/>'
        )
    parts.append("</svg>")
    return "".join(parts)


_STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2rem auto; max-width: 78rem; color: #222;
       padding: 0 1rem; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.2rem; margin-top: 2rem; }
h3 { font-size: 1rem; margin: 1.5rem 0 .3rem; }
table { border-collapse: collapse; margin: .5rem 0; }
th, td { padding: .25rem .6rem; border-bottom: 1px solid #ddd; text-align: left; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
.meta, .records { color: #555; }
.swatch { display: inline-block; width: .8em; height: .8em; margin-right: .4em; }
svg.chart text.axis { font-size: 11px; fill: #555; }
img#chart-png { max-width: 100%; border: 1px solid #eee; }
"""


def render_page(result: dict[str, Any], chart: str | None, price: float | None) -> str:
    """The report page for a replay ``result`` with per-step measures.

    Args:
        result: :func:`veil.default_plugins.replay.report.run_replay`'s result, run with
            ``per_step=True``.
        chart: the PNG's file name relative to the page (None: no PNG was drawn).
        price: dollars per million uncached input tokens (None: no dollars).
    """
    from veil.default_plugins.replay.report import records_line

    total = result["total"]
    files = result["files"]
    names = _policies(total)
    cache_price = result.get("cache_price", 0.1)
    meta = [
        f"{len(files):,} session{'s' if len(files) != 1 else ''}",
        f"{total['steps']:,} steps",
        f"budget {result.get('budget', '?'):,} tokens"
        if isinstance(result.get("budget"), int)
        else "",
        f"cached input priced at {cache_price}x",
        f"${price:,g} per million input tokens"
        if price is not None
        else "no price given (--price-per-mtok) so no dollars",
    ]
    body = [
        "<h1>veil replay: what each policy would have cost</h1>",
        f'<p class="meta">{_esc(" · ".join(m for m in meta if m))}</p>',
        '<section id="totals"><h2>Total</h2>',
        _policy_rows(total, names, price, "totals-table"),
        '<p class="meta">effective tokens = uncached + cache price x cached; dollars = '
        "effective tokens x price per million; a miss is an identifier the next step takes "
        "from earlier tool output that the policy's prompt no longer holds.</p></section>",
    ]
    if chart is None:
        from veil.default_plugins.replay.plot import install_hint

        hint = _esc(install_hint("matplotlib"))
        body.append(f'<p class="meta">No PNG: it needs matplotlib ({hint}).</p>')
    else:
        body.append(
            '<section id="chart"><h2>Per step</h2>'
            f'<img id="chart-png" src="{_esc(chart)}" alt="total effective tokens per policy '
            'and effective tokens per step for the first sessions"></section>'
        )
    # sessions at a glance: effective tokens (dollars) per policy
    head = "".join(f'<th class="num">{_esc(n)}</th>' for n in names)
    rows = []
    for k, entry in enumerate(files):
        cells = []
        for n in names:
            eff = entry[n]["effective_tokens"]
            money = format_dollars(dollars(eff, price))
            cells.append(
                f'<td class="num">{eff:,.0f}'
                + (f"<br><small>{money}</small>" if price is not None else "")
                + "</td>"
            )
        rows.append(
            f'<tr><td><a href="#session-{k + 1}" title="{_esc(entry["file"])}">'
            f"{_esc(Path(entry['file']).name)}</a></td><td>{_esc(entry['format'])}</td>"
            f'<td class="num">{entry["steps"]:,}</td>{"".join(cells)}</tr>'
        )
    body.append(
        '<section id="sessions"><h2>Sessions: effective tokens per policy</h2>'
        f'<table id="sessions-table"><thead><tr><th>session</th><th>format</th>'
        f'<th class="num">steps</th>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
    )
    for k, entry in enumerate(files):
        series = {n: step_costs(entry[n], cache_price) for n in names}
        records = _esc(records_line(entry.get("records")))
        body.append(
            f'<section class="session" id="session-{k + 1}">'
            f"<h3>{_esc(Path(entry['file']).name)}</h3>"
            f'<p class="meta">{_esc(entry["file"])} · {_esc(entry["format"])} · '
            f"{entry['steps']:,} steps</p>"
            + (f'<p class="records">{records}</p>' if records else "")
            + _policy_rows(entry, names, price, f"session-{k + 1}-table")
            + svg_chart(series)
            + "</section>"
        )
    body.append("</section>")
    skipped = result.get("skipped") or []
    if skipped:
        items = "".join(f"<li>{_esc(s['reason'])}</li>" for s in skipped)
        body.append(f'<section id="skipped"><h2>Recordings skipped</h2><ul>{items}</ul></section>')
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        "<title>veil replay report</title>"
        f"<style>{_STYLE}</style></head><body>{''.join(body)}</body></html>\n"
    )


def draw_chart(result: dict[str, Any], path: Path, price: float | None) -> Path:
    """Draw the report's PNG: total effective tokens per policy as bars (dollars in the
    labels when priced), then effective tokens per step of the first :data:`CHART_SESSIONS`
    sessions, one panel each.

    Raises:
        PlotUnavailable: matplotlib is not installed.
        OSError: the image cannot be written.
    """
    from veil.default_plugins.replay.plot import PlotUnavailable, matplotlib_missing

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import MaxNLocator
    except ImportError as exc:
        raise PlotUnavailable(matplotlib_missing("--report: the PNG")) from exc
    total = result["total"]
    names = _policies(total)
    cache_price = result.get("cache_price", 0.1)
    shown = result["files"][:CHART_SESSIONS]
    fig, axes = plt.subplots(1 + len(shown), 1, figsize=(9, 2.2 + 2.1 * len(shown)), squeeze=False)
    bars = axes[0][0]
    values = [total[n]["effective_tokens"] for n in names]
    bars.barh(names, values, color=[POLICY_COLORS.get(n, "#000") for n in names])
    bars.invert_yaxis()
    for i, v in enumerate(values):
        label = f" {v:,.0f}"
        if price is not None:
            label += f"  ({format_dollars(dollars(v, price))})"
        bars.text(v, i, label, va="center", fontsize=8)
    bars.set_title(
        f"Total effective tokens ({total['steps']:,} steps, cached input at {cache_price}x)",
        fontsize=10,
    )
    bars.tick_params(labelsize=8)
    bars.set_xlim(0, max(values, default=1) * 1.35 or 1)
    for row, entry in enumerate(shown, start=1):
        ax = axes[row][0]
        for n in names:
            ax.plot(step_costs(entry[n], cache_price), color=POLICY_COLORS.get(n), lw=1.2, label=n)
        ax.set_title(f"{Path(entry['file']).name}: effective tokens per step", fontsize=9)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole numbers
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.3)
    if shown:
        axes[-1][0].set_xlabel("step", fontsize=9)
        axes[1][0].legend(fontsize=7, ncol=min(4, len(names)), loc="upper left")
    fig.tight_layout()
    _atomic(path, lambda tmp: fig.savefig(tmp, dpi=100, format="png"))
    plt.close(fig)
    return path


def _atomic(path: Path, write: Any) -> None:
    """Run ``write(temporary path)`` in ``path``'s folder, then rename it to ``path``."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@dataclass
class ReportFiles:
    """What :func:`write_report` wrote.

    Attributes:
        page: the HTML page.
        chart: the PNG, or None when matplotlib is not installed (the page says so).
    """

    page: Path
    chart: Path | None


def write_report(
    result: dict[str, Any], folder: str | Path, *, price_per_mtok: float | None = None
) -> ReportFiles:
    """Write ``folder/index.html`` and ``folder/replay.png`` for a replay ``result``.

    Args:
        result: a result with per-step measures (``run_replay(..., per_step=True)``).
        folder: the report folder (created if missing).
        price_per_mtok: dollars per million uncached input tokens (None: no dollars).

    Returns:
        The paths written; without matplotlib the page is written without the PNG.

    Raises:
        BadRequest: the result has no file or no per-step measures, or the price is negative.
        OSError: the folder or a file cannot be written.
    """
    from veil.default_plugins.replay.plot import PlotUnavailable

    if price_per_mtok is not None and not price_per_mtok >= 0:
        raise BadRequest(f"price_per_mtok: expected a price of 0 or more, got {price_per_mtok}")
    files = result.get("files") or []
    if not files:
        raise BadRequest("--report: the replay has no session to report")
    names = _policies(files[0])
    if not names or "per_step" not in files[0][names[0]]:
        raise BadRequest("--report: the replay result has no per-step measures (per_step=True)")
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    chart: Path | None = out / CHART
    try:
        draw_chart(result, out / CHART, price_per_mtok)
    except PlotUnavailable:
        chart = None
    page = out / PAGE
    text = render_page(result, CHART if chart else None, price_per_mtok)
    _atomic(page, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
    return ReportFiles(page, chart)
