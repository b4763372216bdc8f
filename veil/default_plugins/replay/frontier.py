"""The cost / misses frontier (issue 29, DESIGN.md "Measures", "Frontier"): every policy swept
over its own knob on the same recordings, priced at several cache prices.

A *point* is one policy at one value of its knob:

* ``veil`` over the budget (its window, in cl100k_base tokens);
* ``masking`` over N, the observations kept verbatim (seed 000 keeps 10);
* ``masking-blocks`` over G, the observations masked at a time (N stays 10);
* ``recency``, ``recency-hysteresis`` and ``masking-budget`` over the budget, the same budgets
  as veil;
* ``full`` once (it has no knob and misses nothing).

Each point is replayed once per file (:func:`~veil.default_plugins.replay.runner.run_policies`);
its totals keep prompt and cached tokens apart, so one run is priced at every cache price
afterwards (:func:`effective`). Baseline points of a file are replayed together (the references
are found once) and their results can be cached on disk (:class:`BaselineCache`), keyed by the
recording's bytes and the code of the measure, so a sweep of veil under new settings does not
replay them again. veil's points are never cached: they depend on every plugin and setting.

The result (:func:`sweep`) is plain JSON, so a plot can be redrawn without replaying
(``bench/bench_frontier.py --plot-only``)::

    {"meta": {"files", "steps", "skipped", "budgets", "masking_keeps", "masking_blocks",
              "reference_budget", "max_steps", "code_version", "seconds", "wall_seconds",
              "jobs", ...},
     "points": [{"policy", "knob", "value", "label", "total": {<policy object>},
                 "files": {<path>: {<policy object>}}}]}

where a policy object is :meth:`~veil.default_plugins.replay.runner.PolicyResult.to_json`'s
(``effective_tokens`` there at :data:`~veil.default_plugins.replay.cache.CACHE_PRICE`; use
:func:`effective` for another price).
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from veil import BadRequest
from veil.default_plugins.replay.cache import effective_tokens

if TYPE_CHECKING:  # pragma: no cover
    from veil.default_plugins.replay.veil_policy import CompactionMode

DEFAULT_BUDGETS = (4000, 6000, 8000, 12000, 16000)
"""veil's budgets and those of the budgeted baselines (issue 29, item 5)."""

MASKING_KEEPS = (3, 5, 10, 20)
"""``masking``'s N: observations kept verbatim (issue 29, item 5)."""

MASKING_BLOCKS = (5, 10, 20)
"""``masking-blocks``' G: observations masked at a time, N = 10 (issue 29, item 5)."""

PRICES = (0.1, 0.5)
"""Cache prices the frontier is drawn at: what Anthropic / OpenAI / DeepSeek / Gemini bill
cached input (0.1x) and a provider that discounts it by half (issue 29)."""

REFERENCE_BUDGET = 8000
"""The budget steps of the policies held to none (full, masking, masking-blocks) are counted
over (issue 18's and 29's tables: 8,000 tokens)."""

BUDGETED = ("recency", "recency-hysteresis", "masking-budget")
"""Baselines swept over the budget, as veil is."""

POLICY_ORDER = ("veil", "full", "masking", "masking-blocks", *BUDGETED)
"""Order of the table's rows and the plot's legend."""

# Modules whose code decides a baseline's figures: their sources key the on-disk cache.
_MEASURE_MODULES = (
    "veil.default_plugins.replay.baselines",
    "veil.default_plugins.replay.runner",
    "veil.default_plugins.replay.measures",
    "veil.default_plugins.replay.cache",
    "veil.default_plugins.replay.counting",
    "veil.default_plugins.replay.formats",
    "veil.default_plugins.replay.frontier",
    "veil.core.prompt.tags",
    "veil.core.models.tokens",
)


@dataclass(frozen=True)
class Point:
    """One policy at one value of its knob.

    Attributes:
        policy: a policy name of :data:`POLICY_ORDER`.
        knob: ``"budget"``, ``"N"`` (masking), ``"G"`` (masking-blocks) or ``""`` (full).
        value: the knob's value (tokens, observations), None for full.
    """

    policy: str
    knob: str = ""
    value: int | None = None

    @property
    def label(self) -> str:
        """A unique name: ``"veil budget=8000"``, ``"masking N=10"``, ``"full"``."""
        return self.policy if self.value is None else f"{self.policy} {self.knob}={self.value}"

    def to_json(self) -> dict[str, Any]:
        """``{"policy", "knob", "value", "label"}``."""
        return {"policy": self.policy, "knob": self.knob, "value": self.value, "label": self.label}


def _positive_ints(values: Iterable[int], what: str) -> tuple[int, ...]:
    out = tuple(dict.fromkeys(values))
    for v in out:
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise BadRequest(f"{what}: expected positive whole numbers, got {v!r}")
    if not out:
        raise BadRequest(f"{what}: expected at least one value")
    return out


def baseline_points(
    budgets: Sequence[int] = DEFAULT_BUDGETS,
    keeps: Sequence[int] = MASKING_KEEPS,
    blocks: Sequence[int] = MASKING_BLOCKS,
) -> list[Point]:
    """The baselines' points: full; masking per N; masking-blocks per G; each budgeted
    baseline (:data:`BUDGETED`) per budget.

    Raises:
        BadRequest: a value is not a positive whole number (the message names the list).
    """
    budgets = _positive_ints(budgets, "budgets")
    points = [Point("full")]
    points += [Point("masking", "N", n) for n in _positive_ints(keeps, "masking_keeps")]
    points += [Point("masking-blocks", "G", g) for g in _positive_ints(blocks, "masking_blocks")]
    points += [Point(name, "budget", b) for name in BUDGETED for b in budgets]
    return points


def make_baseline(point: Point, counter: Callable[[str], int]) -> Any:
    """A fresh baseline policy for ``point``, named by its label (so several points of one
    baseline can be replayed together).

    Raises:
        BadRequest: ``point`` is not a baseline point.
    """
    from veil.default_plugins.replay.runner import (
        FullHistory,
        MaskingBlocks,
        MaskingBudget,
        ObservationMasking,
        RecencyHysteresis,
        RecencyTruncation,
    )

    makers: dict[str, Callable[[], Any]] = {
        "full": FullHistory,
        "masking": lambda: ObservationMasking(keep=point.value),
        "masking-blocks": lambda: MaskingBlocks(block=point.value),
        "recency": lambda: RecencyTruncation(point.value, counter),
        "recency-hysteresis": lambda: RecencyHysteresis(point.value, counter),
        "masking-budget": lambda: MaskingBudget(point.value, counter),
    }
    if point.policy not in makers:
        raise BadRequest(f"policies: {point.policy!r} is not a baseline")
    policy = makers[point.policy]()
    policy.name = point.label
    return policy


def code_version() -> str:
    """A hash of the sources of the modules that decide a baseline's figures (the cache key's
    code part): a change to the measure, a baseline or the tokenizer's wrapper invalidates
    every cached result."""
    import importlib
    import inspect

    digest = hashlib.sha256()
    for name in _MEASURE_MODULES:
        module = importlib.import_module(name)
        digest.update(name.encode())
        digest.update(inspect.getsource(module).encode())
    return digest.hexdigest()[:16]


def _file_hash(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:32]


class BaselineCache:
    """Baseline results on disk, one JSON file per (recording, code version, reference budget,
    steps replayed), each ``{label: policy object}``.

    Writes are atomic (a temporary file renamed over the entry), so concurrent sweeps never
    read half a file; two that race write the same figures. An unreadable or damaged entry is
    a miss, replayed again.

    Args:
        folder: where entries live (created when first written).
    """

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self._version = code_version()

    def _entry(self, path: str | Path, reference_budget: int, max_steps: int | None) -> Path:
        key = f"{_file_hash(path)}-{self._version}-{reference_budget}-{max_steps or 'all'}"
        return self.folder / f"{key}.json"

    def get(
        self, path: str | Path, reference_budget: int, max_steps: int | None
    ) -> dict[str, dict[str, Any]]:
        """The cached ``{label: policy object}`` of ``path`` (empty when none)."""
        entry = self._entry(path, reference_budget, max_steps)
        try:
            data = json.loads(entry.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def put(
        self,
        path: str | Path,
        reference_budget: int,
        max_steps: int | None,
        results: dict[str, dict[str, Any]],
    ) -> None:
        """Add ``results`` (``{label: policy object}``) to ``path``'s entry, atomically.

        Raises:
            OSError: the folder cannot be written.
        """
        entry = self._entry(path, reference_budget, max_steps)
        entry.parent.mkdir(parents=True, exist_ok=True)
        merged = {**self.get(path, reference_budget, max_steps), **results}
        tmp = entry.with_name(f"{entry.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(merged), encoding="utf-8")
        os.replace(tmp, entry)


def veil_code_version() -> str:
    """A hash of every ``.py`` file of the veil package and, beside it, of ``plugins/`` (a
    checkout): what a veil point's figures depend on besides the settings."""
    import veil

    root = Path(veil.__file__).resolve().parent
    digest = hashlib.sha256()
    for folder in (root, root.parent / "plugins"):
        if not folder.is_dir():
            continue
        for path in sorted(folder.rglob("*.py")):
            if ".venv" in path.parts or "tests" in path.parts:
                continue
            digest.update(str(path.relative_to(folder.parent)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


class Checkpoint:
    """The finished jobs of a sweep on disk, one JSON file per job, so a sweep stopped half way
    (a crash, a kill, a reboot) is run again and replays only what was not finished.

    A job's file name hashes everything its figures depend on: the recording's bytes, the
    job (veil at a budget, or the baseline points), the sweep's options, veil's code
    (:func:`veil_code_version`), the measure's code (:func:`code_version`), the project's
    ``.veil/settings.json`` and the ``VEIL_*`` variables. So a checkpoint folder may be reused
    across runs with other options or code: what no longer matches is replayed. Writes are
    atomic (a temporary file renamed).

    Args:
        folder: where job files live (created when first written).
        options: the sweep's options (JSON-able values).
    """

    def __init__(self, folder: str | Path, options: dict[str, Any]) -> None:
        self.folder = Path(folder)
        settings = ""
        project = options.get("project_dir")
        settings_file = Path(project or ".") / ".veil" / "settings.json"
        if settings_file.is_file():
            settings = settings_file.read_text(encoding="utf-8", errors="replace")
        fingerprint = {
            # the project counts by its settings (a scratch project's path changes per run)
            "options": {
                k: v for k, v in options.items() if k not in ("cache_folder", "project_dir")
            },
            "settings": settings,
            "env": sorted((k, v) for k, v in os.environ.items() if k.startswith("VEIL_")),
            "veil": veil_code_version(),
            "measure": code_version(),
        }
        self._fingerprint = json.dumps(fingerprint, sort_keys=True, default=str)
        self._hashes: dict[str, str] = {}

    def _path(self, kind: str, path: str, arg: Any) -> Path:
        if path not in self._hashes:
            self._hashes[path] = _file_hash(path)
        what = arg if kind == "veil" else [p.label for p in arg]
        key = json.dumps([self._fingerprint, kind, self._hashes[path], what], default=str)
        digest = hashlib.sha256(key.encode()).hexdigest()[:32]
        return self.folder / f"{kind}-{Path(path).name}-{digest}.json"

    def get(self, kind: str, path: str, arg: Any) -> tuple[float, Any] | None:
        """``(seconds, result)`` of a finished job, or None (never run, or unreadable)."""
        try:
            data = json.loads(self._path(kind, path, arg).read_text(encoding="utf-8"))
            return float(data["seconds"]), data["result"]
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(self, kind: str, path: str, arg: Any, seconds: float, result: Any) -> None:
        """Keep a finished job's result.

        Raises:
            OSError: the folder cannot be written.
        """
        target = self._path(kind, path, arg)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"seconds": seconds, "result": result}), encoding="utf-8")
        os.replace(tmp, target)


def _load(path: str, max_steps: int | None) -> Any:
    from veil.default_plugins.replay.formats import load_trajectory

    traj = load_trajectory(path)
    if max_steps is not None:
        traj.steps = traj.steps[:max_steps]
    return traj


def measure_baselines(
    path: str,
    points: Sequence[Point],
    *,
    reference_budget: int = REFERENCE_BUDGET,
    max_steps: int | None = None,
    cache_folder: str | None = None,
) -> dict[str, dict[str, Any]]:
    """Replay one recording through the baseline ``points`` (together: references are found
    once) and return ``{label: policy object}``.

    Args:
        path: the recording.
        points: baseline points (:func:`baseline_points`).
        reference_budget: the budget the steps of unbudgeted points are counted over.
        max_steps: replay only the first N steps.
        cache_folder: a :class:`BaselineCache` folder; points found there are not replayed,
            points replayed are added.

    Raises:
        BadRequest: the recording cannot be read (the message names it) or holds no step.
    """
    from veil.default_plugins.replay.counting import TokenCounter
    from veil.default_plugins.replay.runner import run_policies

    cache = BaselineCache(cache_folder) if cache_folder else None
    known = cache.get(path, reference_budget, max_steps) if cache else {}
    todo = [p for p in points if p.label not in known]
    out = {p.label: known[p.label] for p in points if p.label in known}
    if todo:
        traj = _load(path, max_steps)
        counter = TokenCounter()
        policies = [make_baseline(p, counter) for p in todo]
        results = run_policies(traj, policies, reference_budget, counter)
        fresh = {label: r.to_json() for label, r in results.items()}
        if cache:
            cache.put(path, reference_budget, max_steps, fresh)
        out.update(fresh)
    return {p.label: out[p.label] for p in points}


def measure_veil(
    path: str,
    budget: int,
    *,
    project_dir: str | None = None,
    max_steps: int | None = None,
    compaction: CompactionMode | None = None,
    disable: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Replay one recording through veil at ``budget`` tokens (the settings of
    ``project_dir``, ``compaction`` and the plugins blocked by ``disable`` as ``veil replay``
    takes them) and return its policy object.

    Raises:
        BadRequest: the recording cannot be read or holds no step.
        ConfigError: the project's settings are wrong.
    """
    from veil.default_plugins.replay.runner import run_policies
    from veil.default_plugins.replay.veil_policy import VeilReplayPolicy

    traj = _load(path, max_steps)
    policy = VeilReplayPolicy(
        traj, budget, project_dir=project_dir, compaction=compaction, disable=disable
    )
    try:
        return run_policies(traj, [policy], budget)["veil"].to_json()
    finally:
        policy.close()


def _quiet_worker() -> None:
    """Each worker uses one thread for torch / BLAS: ``--jobs`` processes share the cores."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = "1"
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _job(kind: str, path: str, arg: Any, options: dict[str, Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    if kind == "baselines":
        result: Any = measure_baselines(
            path,
            arg,
            reference_budget=options["reference_budget"],
            max_steps=options["max_steps"],
            cache_folder=options["cache_folder"],
        )
    else:
        result = measure_veil(
            path,
            arg,
            project_dir=options["project_dir"],
            max_steps=options["max_steps"],
            compaction=options["compaction"],
            disable=options["disable"],
        )
    return time.perf_counter() - started, result


def usable_files(
    files: Iterable[str | Path], max_steps: int | None = None
) -> tuple[dict[str, int], list[dict[str, str]]]:
    """Split ``files`` into ``{path: steps replayed}`` for the recordings that hold a step and
    ``[{"file", "reason"}]`` for those that hold none (an agent stopped before its first
    message: skipped, as ``veil replay`` does). ``max_steps`` caps the steps counted.

    Raises:
        BadRequest: a file is unreadable or in no known format (the message names it).
    """
    from veil.default_plugins.replay.formats import EmptyTrajectory, load_trajectory

    kept: dict[str, int] = {}
    skipped: list[dict[str, str]] = []
    for f in files:
        try:
            steps = len(load_trajectory(f).steps)
        except EmptyTrajectory as exc:
            skipped.append({"file": str(f), "reason": exc.message})
            continue
        kept[str(f)] = steps if max_steps is None else min(steps, max_steps)
    return kept, skipped


def sweep(
    files: Sequence[str | Path],
    *,
    budgets: Sequence[int] = DEFAULT_BUDGETS,
    keeps: Sequence[int] = MASKING_KEEPS,
    blocks: Sequence[int] = MASKING_BLOCKS,
    with_veil: bool = True,
    project_dir: str | Path | None = None,
    compaction: CompactionMode | None = None,
    disable: Sequence[str] = (),
    jobs: int = 1,
    cache_folder: str | Path | None = None,
    reference_budget: int = REFERENCE_BUDGET,
    max_steps: int | None = None,
    progress: Callable[[str], None] | None = None,
    checkpoint: str | Path | None = None,
) -> dict[str, Any]:
    """Replay ``files`` at every point of the frontier and add up the totals.

    Args:
        files: recordings (files that hold no step are skipped and listed in
            ``meta.skipped``).
        budgets: veil's budgets and the budgeted baselines' (tokens).
        keeps: masking's N values. blocks: masking-blocks' G values.
        with_veil: replay veil's points too (without them the sweep takes seconds).
        project_dir: the project whose settings veil runs with (default: the current one).
        compaction: veil's compaction mode (None: what the settings say).
        disable: plugins blocked in veil's sessions.
        jobs: processes to replay in (each file x budget of veil is one job, the baselines of
            a file another, started in the order of ``files``); 1 replays in this process.
        cache_folder: where baseline results are cached (:class:`BaselineCache`); None: no
            cache.
        reference_budget: what the unbudgeted baselines' steps are counted over.
        max_steps: replay only the first N steps of each file (CI).
        progress: called with a line per finished job.
        checkpoint: a folder where each finished job is kept (:class:`Checkpoint`): run the
            same sweep again after a crash or a kill and only unfinished jobs are replayed.

    Returns:
        The JSON of the module docstring.

    Raises:
        BadRequest: a list is empty or holds a non-positive value, ``jobs`` < 1, a file is
            unreadable, or no file holds a step.
    """
    budgets = _positive_ints(budgets, "budgets")
    (reference_budget,) = _positive_ints([reference_budget], "reference_budget")
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise BadRequest(f"jobs: expected a positive whole number, got {jobs!r}")
    points = baseline_points(budgets, keeps, blocks)
    steps, skipped = usable_files(files, max_steps)
    paths = list(steps)
    if not paths:
        raise BadRequest(
            "no file to replay"
            + (": " + "; ".join(s["reason"] for s in skipped) if skipped else "")
        )
    options = {
        "reference_budget": reference_budget,
        "max_steps": max_steps,
        "cache_folder": str(cache_folder) if cache_folder is not None else None,
        "project_dir": str(project_dir) if project_dir is not None else None,
        "compaction": compaction,
        "disable": tuple(disable),
    }
    # in the order given (bench_frontier.py puts the sessions' subsets first, so a run cut
    # short has whole subsets), every budget of a file together
    work: list[tuple[str, str, Any]] = []
    if with_veil:
        work += [("veil", p, b) for p in paths for b in budgets]
    work += [("baselines", p, points) for p in paths]
    started = time.perf_counter()
    done: dict[tuple[str, str, Any], Any] = {}
    seconds: dict[str, float] = {}
    kept = Checkpoint(checkpoint, options) if checkpoint is not None else None

    def record(item: tuple[str, str, Any], took: float, result: Any, resumed: bool) -> None:
        kind, path, arg = item
        key = "baselines" if kind == "baselines" else f"veil budget={arg}"
        seconds[key] = seconds.get(key, 0.0) + took
        done[(kind, path, arg if kind == "veil" else None)] = result
        if kept is not None and not resumed:
            kept.put(*item, took, result)
        if progress is not None:
            where = f"{Path(path).parent.name}/{Path(path).name}"
            progress(f"{key}: {where} {took:.1f} s" + (" (from the checkpoint)" if resumed else ""))

    todo = []
    for item in work:
        found = kept.get(*item) if kept is not None else None
        if found is not None:
            record(item, *found, resumed=True)
        else:
            todo.append(item)
    if jobs == 1:
        for item in todo:
            took, result = _job(*item, options)
            record(item, took, result, resumed=False)
    elif todo:
        context = multiprocessing.get_context("spawn")  # no torch state shared with workers
        with ProcessPoolExecutor(jobs, mp_context=context, initializer=_quiet_worker) as pool:
            futures: dict[Future, tuple[str, str, Any]] = {
                pool.submit(_job, *item, options): item for item in todo
            }
            for future in as_completed(futures):  # kept as each finishes
                took, result = future.result()
                record(futures[future], took, result, resumed=False)

    from veil.default_plugins.replay.runner import PolicyResult

    out_points: list[dict[str, Any]] = []
    veil_points = [Point("veil", "budget", b) for b in budgets] if with_veil else []
    for point in veil_points + points:
        per_file = {}
        total = PolicyResult()
        for path in paths:
            if point.policy == "veil":
                obj = done[("veil", path, point.value)]
            else:
                obj = done[("baselines", path, None)][point.label]
            per_file[path] = obj
            total.add(PolicyResult.from_json(obj))
        entry = point.to_json()
        entry["total"] = {"steps": sum(steps.values()), **total.to_json()}
        entry["files"] = per_file
        out_points.append(entry)
    return {
        "meta": {
            "files": paths,
            "steps": steps,
            "skipped": skipped,
            "budgets": list(budgets),
            "masking_keeps": [p.value for p in points if p.policy == "masking"],
            "masking_blocks": [p.value for p in points if p.policy == "masking-blocks"],
            "reference_budget": reference_budget,
            "max_steps": max_steps,
            "code_version": code_version(),
            "seconds": {k: round(v, 1) for k, v in seconds.items()},
            "wall_seconds": round(time.perf_counter() - started, 1),
            "jobs": jobs,
        },
        "points": out_points,
    }


# --- pricing, the table and the targets ----------------------------------------------------------


def effective(total: dict[str, Any], price: float) -> float:
    """Effective tokens of a policy object at cache price ``price``:
    ``(prompt - cached) + price x cached`` (:func:`~veil.default_plugins.replay.cache.effective_tokens`).
    """
    return effective_tokens(total["prompt_tokens"], total["cached_tokens"], price)


def _full(result: dict[str, Any]) -> dict[str, Any]:
    for point in result["points"]:
        if point["policy"] == "full":
            return point["total"]
    raise BadRequest("frontier: the sweep has no full-history point to compare with")


def ratios(result: dict[str, Any], prices: Sequence[float] = PRICES) -> list[dict[str, Any]]:
    """One row per point, in :data:`POLICY_ORDER` then knob order: ``{"label", "policy",
    "knob", "value", "ratio": {price: effective / full history's effective}, "misses",
    "line_misses", "over_budget_steps", "tokens_per_step", "cached_share"}``.

    Raises:
        BadRequest: the sweep has no full-history point.
    """
    full = _full(result)
    rows = []
    for point in result["points"]:
        total = point["total"]
        steps = max(1, total.get("steps", 0))
        rows.append(
            {
                "label": point["label"],
                "policy": point["policy"],
                "knob": point["knob"],
                "value": point["value"],
                "ratio": {p: effective(total, p) / effective(full, p) for p in prices},
                "misses": total["misses"],
                "line_misses": total.get("line_misses", 0),
                "over_budget_steps": total["over_budget_steps"],
                "tokens_per_step": total["prompt_tokens"] / steps,
                "cached_share": total["cached_tokens"] / max(1, total["prompt_tokens"]),
            }
        )
    order = {name: i for i, name in enumerate(POLICY_ORDER)}
    rows.sort(key=lambda r: (order.get(r["policy"], len(order)), r["value"] or 0))
    return rows


def render_table(result: dict[str, Any], prices: Sequence[float] = PRICES) -> str:
    """A Markdown table of every point: policy, knob, effective / full history's at each price,
    identifier misses, line misses, steps over the budget (its own; the reference budget for
    full, masking and masking-blocks, marked ``*``), prompt tokens per step and the cached
    share."""
    meta = result.get("meta", {})
    ref = meta.get("reference_budget", REFERENCE_BUDGET)
    head = (
        "| policy | knob | "
        + " | ".join(f"effective / full @{p}" for p in prices)
        + " | misses | line misses | over budget | tokens / step | cached |"
    )
    lines = [head, "|---|---:|" + "---:|" * (len(prices) + 5)]
    for row in ratios(result, prices):
        knob = f"{row['knob']}={row['value']:,}" if row["value"] is not None else "-"
        over = f"{row['over_budget_steps']:,}"
        if row["policy"] in ("full", "masking", "masking-blocks"):
            over += "*"
        lines.append(
            f"| {row['policy']} | {knob} | "
            + " | ".join(f"{row['ratio'][p]:.3f}" for p in prices)
            + f" | {row['misses']:,} | {row['line_misses']:,} | {over} | "
            f"{row['tokens_per_step']:,.0f} | {100 * row['cached_share']:.1f}% |"
        )
    lines.append(
        f"\n\\* steps over {ref:,} tokens (policies held to no budget); the others: steps over "
        "their own budget."
    )
    return "\n".join(lines)


def dominance(
    result: dict[str, Any], prices: Sequence[float] = PRICES
) -> dict[float, list[dict[str, Any]]]:
    """Issue 29's dominance target: for every baseline point but full history, is there a veil
    point with effective cost no higher and fewer misses on both measures (identifier and
    line), at each price?

    Returns:
        ``{price: [row of :func:`ratios` for each baseline point NOT dominated]}``; all lists
        empty when the target holds. Without veil points every baseline point is listed.
    """
    rows = ratios(result, prices)
    veil = [r for r in rows if r["policy"] == "veil"]
    out: dict[float, list[dict[str, Any]]] = {}
    for price in prices:
        out[price] = [
            b
            for b in rows
            if b["policy"] not in ("veil", "full")
            and not any(
                v["ratio"][price] <= b["ratio"][price]
                and v["misses"] < b["misses"]
                and v["line_misses"] < b["line_misses"]
                for v in veil
            )
        ]
    return out


def never_dearer(result: dict[str, Any], prices: Sequence[float] = PRICES) -> list[dict[str, Any]]:
    """Issue 29's "never dearer than sending everything": per veil point, its effective cost
    as a ratio to full history's at each price and whether it is at most 1 at all of them.

    Returns:
        ``[{"label", "value", "ratio": {price: float}, "ok": bool}]`` in budget order.
    """
    return [
        {
            "label": r["label"],
            "value": r["value"],
            "ratio": r["ratio"],
            "ok": all(r["ratio"][p] <= 1.0 for p in prices),
        }
        for r in ratios(result, prices)
        if r["policy"] == "veil"
    ]


def render_targets(result: dict[str, Any], prices: Sequence[float] = PRICES) -> str:
    """The dominance and never-dearer checks as text (what ``bench_frontier.py`` prints)."""
    lines = []
    for price, left in dominance(result, prices).items():
        if not left:
            lines.append(f"dominance at cache price {price}: every baseline point is dominated")
            continue
        lines.append(
            f"dominance at cache price {price}: {len(left)} baseline point(s) not dominated "
            "(no veil point costs no more with fewer identifier and fewer line misses):"
        )
        for row in left:
            lines.append(
                f"  {row['label']}: {row['ratio'][price]:.3f} x full, {row['misses']:,} misses, "
                f"{row['line_misses']:,} line misses"
            )
    for row in never_dearer(result, prices):
        parts = ", ".join(f"{row['ratio'][p]:.3f} at {p}" for p in prices)
        verdict = "ok" if row["ok"] else "DEARER than full history"
        lines.append(f"never dearer than full: {row['label']}: {parts}: {verdict}")
    return "\n".join(lines)


# --- the plot ----------------------------------------------------------------------------------

COLORS = {
    "veil": "#c0392b",
    "full": "#000000",
    "masking": "#1f77b4",
    "masking-blocks": "#17becf",
    "recency": "#2ca02c",
    "recency-hysteresis": "#9467bd",
    "masking-budget": "#ff7f0e",
}
MARKERS = {
    "veil": "o",
    "full": "*",
    "masking": "s",
    "masking-blocks": "D",
    "recency": "^",
    "recency-hysteresis": "v",
    "masking-budget": "P",
}


def _knob_text(row: dict[str, Any]) -> str:
    if row["value"] is None:
        return ""
    if row["knob"] == "budget":
        return f"{row['value'] / 1000:g}k"
    return f"{row['knob']}{row['value']}"


def plot_frontier(
    result: dict[str, Any],
    prefix: str | Path,
    prices: Sequence[float] = PRICES,
    title: str | None = None,
    compare: Sequence[tuple[str, dict[str, Any]]] = (),
) -> list[Path]:
    """Draw the frontier: effective cost (x, a ratio to full history's) against misses (y), one
    line per policy over its knob (each point labelled with its knob's value), one panel per
    cache price; one figure for identifier misses (``<prefix>-misses.png``) and one for line
    misses (``<prefix>-line-misses.png``).

    Args:
        result: a :func:`sweep` result.
        prefix: the PNGs' path without ``-misses.png``.
        prices: one panel per cache price.
        title: the figures' heading.
        compare: ``(label, other sweep)`` pairs whose veil points are drawn too, dashed and
            grey (an earlier sweep of veil on the same files, e.g. ``"veil before"``): each
            priced against its own full history.

    Returns:
        The two paths written.

    Raises:
        BadRequest: a sweep has no full-history point, or a compared sweep covers other files.
        PlotUnavailable: matplotlib is not installed.
        OSError: an image cannot be written.
    """
    from veil.default_plugins.replay.plot import PlotUnavailable, matplotlib_missing

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise PlotUnavailable(matplotlib_missing("plot")) from exc
    rows = ratios(result, prices)
    meta = result.get("meta", {})
    n_files, n_steps = len(meta.get("files", [])), sum((meta.get("steps") or {}).values())
    others = []
    for label, other in compare:
        if other.get("meta", {}).get("steps") != meta.get("steps"):
            raise BadRequest(f"compare: {label!r} was measured on other files or steps")
        others.append((label, [r for r in ratios(other, prices) if r["policy"] == "veil"]))
    written = []
    for measure, name, suffix in (
        ("misses", "identifier misses", "misses"),
        ("line_misses", "line misses", "line-misses"),
    ):
        fig, axes = plt.subplots(1, len(prices), figsize=(6.2 * len(prices), 6.0), squeeze=False)
        for ax, price in zip(axes[0], prices, strict=True):
            for policy in POLICY_ORDER:
                series = [r for r in rows if r["policy"] == policy]
                if not series:
                    continue
                xs = [r["ratio"][price] for r in series]
                ys = [r[measure] for r in series]
                ax.plot(
                    xs,
                    ys,
                    marker=MARKERS[policy],
                    color=COLORS[policy],
                    label=policy + (f" ({series[0]['knob']})" if series[0]["knob"] else ""),
                    linewidth=2.2 if policy == "veil" else 1.2,
                    markersize=9 if policy == "full" else 5,
                )
                for r, x, y in zip(series, xs, ys, strict=True):
                    ax.annotate(
                        _knob_text(r),
                        (x, y),
                        textcoords="offset points",
                        xytext=(4, 3),
                        fontsize=7,
                        color=COLORS[policy],
                    )
            for k, (label, series) in enumerate(others):
                ax.plot(
                    [r["ratio"][price] for r in series],
                    [r[measure] for r in series],
                    marker="o",
                    color=("#7f7f7f", "#bcbd22", "#8c564b", "#e377c2")[k % 4],
                    linestyle="--",
                    linewidth=1.4,
                    markersize=4,
                    label=label,
                )
            ax.axvline(1.0, color="#888888", linestyle=":", linewidth=1)
            ax.set_xlabel(f"effective cost / full history's (cached input at {price}x)")
            ax.set_ylabel(f"{name} (summed over steps)")
            ax.set_title(f"cache price {price}", fontsize=10)
            ax.grid(alpha=0.3)
            ax.set_ylim(bottom=0)
            ax.set_xlim(left=0)
        handles, labels = axes[0][0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=8, frameon=False)
        heading = title or "Cost against misses, each policy over its knob"
        fig.suptitle(f"{heading}: {name}, {n_files} files, {n_steps:,} steps", fontsize=11)
        fig.tight_layout(rect=(0, 0.1, 1, 1))  # the legend's rows below the panels
        out = Path(f"{prefix}-{suffix}.png")
        fig.savefig(out, dpi=110)
        plt.close(fig)
        written.append(out)
    return written
