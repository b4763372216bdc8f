"""``veil replay``: the command line of the replay (added by :mod:`veil.default_plugins.replay`).

The command reads its project and blocked plugins from the CLI's shared state
(:class:`veil.cli.VeilContext`: ``project``, ``disabled``), so ``--project`` and
``--disable-plugin`` given before ``replay`` apply to the replayed sessions too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from veil import PluginHookFailed, VeilError, store_option
from veil.default_plugins.replay.sessions import AGENTS


def add_replay_command(cli: click.Group) -> None:
    """Add ``veil replay FILES... [options]`` to ``cli``."""

    @cli.command("replay")
    @store_option
    @click.argument("files", nargs=-1, type=click.Path(exists=True))
    @click.option(
        "--from",
        "from_agent",
        type=click.Choice(AGENTS),
        default=None,
        help="Replay this project's own sessions of an agent, found where it keeps them "
        "(~/.claude/projects, ~/.codex/sessions, ~/.pi/agent/sessions).",
    )
    @click.option(
        "--project",
        "replay_project",
        type=click.Path(file_okay=False, exists=True),
        default=None,
        metavar="DIR",
        help="The project whose sessions --from finds and whose settings veil uses "
        "(default: veil's --project, else the current folder).",
    )
    @click.option(
        "--budget",
        default=8000,
        show_default=True,
        type=click.IntRange(min=1),
        help="Prompt budget in tokens (cl100k_base).",
    )
    @click.option(
        "--window",
        default=None,
        type=click.IntRange(min=1),
        help="Replay veil as a model with this context window and no budget set "
        "(context.budgetTokens unset), as a session on a large-window model runs: veil's "
        "context.targetTokens applies. The baselines use it as their budget. Replaces --budget.",
    )
    @click.option(
        "--compaction",
        type=click.Choice(["none", "masking", "full", "both"]),
        default=None,
        help="Compaction during the replay (default: what settings say).",
    )
    @click.option(
        "--cache-price",
        default=0.1,
        show_default=True,
        type=click.FloatRange(0, 1),
        help="Price of a cached input token relative to an uncached one (effective tokens).",
    )
    @click.option(
        "--policies",
        "policies_text",
        default=None,
        metavar="NAMES",
        help="Comma-separated policies to run (default all: veil, full, masking, recency, "
        "masking-blocks, recency-hysteresis, masking-budget). Without veil the replay takes "
        "seconds.",
    )
    @click.option(
        "--per-step",
        is_flag=True,
        help="Print the JSON result with per-step prompt, cached tokens and misses "
        "(implies --json).",
    )
    @click.option(
        "--plot",
        "plot_path",
        type=click.Path(dir_okay=False, writable=True),
        default=None,
        metavar="FILE.png",
        help="Draw prompt and cached tokens per step for every policy (needs matplotlib).",
    )
    @click.option(
        "--plot-files",
        default=4,
        show_default=True,
        type=click.IntRange(min=1),
        help="How many files (the first ones) --plot draws, a row each.",
    )
    @click.option(
        "--sweep",
        is_flag=True,
        help="The cost / misses frontier: veil and the budgeted baselines at each of --budgets, "
        "masking over N 3, 5, 10, 20, masking-blocks over G 5, 10, 20, full once; a table "
        "priced at cache prices 0.1 and 0.5, the dominance check, and with --plot PREFIX two "
        "PNGs (PREFIX-misses.png, PREFIX-line-misses.png).",
    )
    @click.option(
        "--budgets",
        "budgets_text",
        default="4000,6000,8000,12000,16000",
        show_default=True,
        metavar="LIST",
        help="With --sweep: comma-separated budgets (tokens).",
    )
    @click.option(
        "--jobs",
        default=1,
        show_default=True,
        type=click.IntRange(min=1),
        help="With --sweep: processes to replay in.",
    )
    @click.option(
        "--report",
        "report_dir",
        type=click.Path(file_okay=False),
        default=None,
        metavar="DIR",
        help="Write DIR/index.html (totals, each session, a per-step chart) and DIR/replay.png.",
    )
    @click.option(
        "--price-per-mtok",
        type=click.FloatRange(min=0),
        default=None,
        metavar="DOLLARS",
        help="Price of a million uncached input tokens: adds dollars to the table and report.",
    )
    @click.option("--json", "as_json", is_flag=True, help="Print the JSON result only.")
    @click.pass_obj
    def replay_cmd(
        state: Any,
        files: tuple[str, ...],
        from_agent: str | None,
        replay_project: str | None,
        budget: int,
        window: int | None,
        compaction: str | None,
        cache_price: float,
        policies_text: str | None,
        per_step: bool,
        plot_path: str | None,
        report_dir: str | None,
        price_per_mtok: float | None,
        plot_files: int,
        sweep: bool,
        budgets_text: str,
        jobs: int,
        as_json: bool,
    ) -> None:
        """Replay recorded agent sessions through veil and six baselines; report prompt tokens,
        cached and effective tokens, peaks, references, misses, prefix breaks and evictions.

        FILES are recordings of mini-swe-agent, SWE-agent, OpenHands (event streams and V1
        conversation folders), Claude Code, Codex or pi, detected from their content; --from
        finds this project's own sessions of an agent instead."""
        from veil.default_plugins.replay.format_openhands_v1 import events_folder
        from veil.default_plugins.replay.report import parse_policies, run_replay
        from veil.default_plugins.replay.sessions import find_sessions

        for f in files:  # a folder is an argument only as an OpenHands V1 conversation
            if Path(f).is_dir() and events_folder(Path(f)) is None:
                raise click.BadParameter(
                    f"{f}: is a directory and not an OpenHands V1 conversation (no "
                    "event-NNNNN-<id>.json files in it or in its events/ folder); give the "
                    "recordings in it as files",
                    param_hint="FILES",
                )
        if sweep:
            _sweep(state, files, budgets_text, compaction, jobs, plot_path, as_json)
            return
        as_json = as_json or per_step
        project = replay_project or state.project
        try:
            paths = list(files)
            if from_agent is not None:
                paths += [str(p) for p in find_sessions(from_agent, project or ".")]
            if not paths:
                raise click.UsageError("give recordings to replay (FILES) or --from AGENT")
            policies = parse_policies(policies_text)
            result = run_replay(
                paths,
                window or budget,
                project_dir=project,
                compaction=compaction,
                disable=tuple(state.disabled),
                progress=not as_json,
                policies=policies,
                cache_price=cache_price,
                per_step=per_step or plot_path is not None or report_dir is not None,
                price_per_mtok=price_per_mtok,
                budget_from_window=window is not None,
            )
        except PluginHookFailed:
            raise  # a plugin's hook failed: veil.cli.main reports it as veil: error: ...
        except VeilError as exc:
            raise click.ClickException(exc.message) from exc
        report = None
        if report_dir is not None:
            from veil.default_plugins.replay.html_report import write_report

            try:
                report = write_report(result, report_dir, price_per_mtok=price_per_mtok)
            except VeilError as exc:
                raise click.ClickException(exc.message) from exc
            except OSError as exc:
                raise click.ClickException(f"--report: cannot write {report_dir}: {exc}") from exc
        if plot_path is not None:
            from veil.default_plugins.replay.plot import plot_replay

            try:
                plot_replay(result, plot_path, max_files=plot_files)
            except VeilError as exc:
                raise click.ClickException(exc.message) from exc
            except OSError as exc:
                raise click.ClickException(f"--plot: cannot write {plot_path}: {exc}") from exc
        for entry in result.get("skipped", []):
            click.echo(f"veil replay: skipped {entry['reason']}", err=True)
        if not per_step:  # drawn, not printed
            for entry in result["files"]:
                for name in policies:
                    entry[name].pop("per_step", None)
                entry["records"].pop("recorded_prompt_tokens", None)
        if as_json:
            click.echo(json.dumps(result, indent=2))
        else:
            from veil.default_plugins.replay.report import render_table

            click.echo(render_table(result))
            if plot_path is not None:
                click.echo(f"plot written to {plot_path}")
        if report is not None:
            where = f"report written to {report.page}"
            if report.chart is None:
                from veil.default_plugins.replay.plot import install_hint

                where += f" (no PNG: it needs matplotlib, {install_hint('matplotlib')})"
            click.echo(where, err=as_json)


def _sweep(
    state: Any,
    files: tuple[str, ...],
    budgets_text: str,
    compaction: str | None,
    jobs: int,
    plot_prefix: str | None,
    as_json: bool,
) -> None:
    """``veil replay --sweep``: :func:`veil.default_plugins.replay.frontier.sweep` over
    ``files``, its table and targets (or its JSON), and the frontier plots."""
    from veil.default_plugins.replay import frontier

    try:
        budgets = [int(b) for b in budgets_text.split(",") if b.strip()]
    except ValueError:
        raise click.BadParameter(
            f"expected comma-separated whole numbers, got {budgets_text!r}",
            param_hint="--budgets",
        ) from None
    try:
        result = frontier.sweep(
            list(files),
            budgets=budgets,
            project_dir=state.project,
            compaction=compaction,  # type: ignore[arg-type]
            disable=tuple(state.disabled),
            jobs=jobs,
        )
        written = []
        if plot_prefix is not None:
            prefix = plot_prefix[:-4] if plot_prefix.endswith(".png") else plot_prefix
            written = frontier.plot_frontier(result, prefix)
    except PluginHookFailed:
        raise
    except VeilError as exc:
        raise click.ClickException(exc.message) from exc
    except OSError as exc:
        raise click.ClickException(f"--plot: cannot write {plot_prefix}: {exc}") from exc
    for entry in result["meta"]["skipped"]:
        click.echo(f"veil replay: skipped {entry['reason']}", err=True)
    if as_json:
        click.echo(json.dumps(result, indent=2))
        return
    click.echo(frontier.render_table(result))
    click.echo()
    click.echo(frontier.render_targets(result))
    for path in written:
        click.echo(f"plot written to {path}")
