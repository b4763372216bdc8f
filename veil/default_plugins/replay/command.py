"""``veil replay``: the command line of the replay (added by :mod:`veil.default_plugins.replay`).

The command reads its project and blocked plugins from the CLI's shared state
(:class:`veil.cli.VeilContext`: ``project``, ``disabled``), so ``--project`` and
``--disable-plugin`` given before ``replay`` apply to the replayed sessions too.
"""

from __future__ import annotations

import json
from typing import Any

import click

from veil.cli import store_option
from veil.core.errors import PluginHookFailed, VeilError


def add_replay_command(cli: click.Group) -> None:
    """Add ``veil replay FILES... [options]`` to ``cli``."""

    @cli.command("replay")
    @store_option
    @click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False, exists=True))
    @click.option(
        "--budget",
        default=8000,
        show_default=True,
        type=click.IntRange(min=1),
        help="Prompt budget in tokens (cl100k_base).",
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
    @click.option("--json", "as_json", is_flag=True, help="Print the JSON result only.")
    @click.pass_obj
    def replay_cmd(
        state: Any,
        files: tuple[str, ...],
        budget: int,
        compaction: str | None,
        cache_price: float,
        policies_text: str | None,
        per_step: bool,
        plot_path: str | None,
        plot_files: int,
        as_json: bool,
    ) -> None:
        """Replay recorded agent sessions (mini-swe-agent, SWE-agent, OpenHands) through veil and
        six baselines; report prompt tokens, cached and effective tokens, peaks, references,
        misses, prefix breaks and evictions."""
        from veil.default_plugins.replay.report import parse_policies, run_replay

        as_json = as_json or per_step
        try:
            policies = parse_policies(policies_text)
            result = run_replay(
                list(files),
                budget,
                project_dir=state.project,
                compaction=compaction,
                disable=tuple(state.disabled),
                progress=not as_json,
                policies=policies,
                cache_price=cache_price,
                per_step=per_step or plot_path is not None,
            )
        except PluginHookFailed:
            raise  # a plugin's hook failed: veil.cli.main reports it as veil: error: ...
        except VeilError as exc:
            raise click.ClickException(exc.message) from exc
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
        if as_json:
            click.echo(json.dumps(result, indent=2))
        else:
            from veil.default_plugins.replay.report import render_table

            click.echo(render_table(result))
            if plot_path is not None:
                click.echo(f"plot written to {plot_path}")
