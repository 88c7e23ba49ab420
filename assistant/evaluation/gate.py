"""The regression gate: compares a run's summary with eval/baseline.json and writes new baselines.
"""

from __future__ import annotations

from typing import Any

from .report import format_cell

# The regression gate looks only at metrics where higher is better. A rise in false refusals
# shows up there too, as a drop in gold_cited / fact_recall.
GATED_METRICS = ("hit@1", "hit@5", "mrr", "recall@5", "gold_cited", "citation_precision",
                 "citation_recall", "fact_recall", "refusal_rate", "supported_share", "near_miss_named")
DEFAULT_TOLERANCE = {"retrieval-only": (0.02, 0.10), "full": (0.10, None)}  # ("all" row, each type row)


def check(summary: dict[str, Any], baseline: dict[str, Any]) -> list[str]:
    """Metrics that fell more than the tolerance below the baseline, as readable lines.

    The baseline holds one section per mode ("retrieval-only", "full"), each a summary of a
    run plus "tolerance" (absolute, for the "all" row) and "type_tolerance" (for each type
    row; null = type rows are not gated, as for a small slice). The run must cover the same
    questions as the section; otherwise ValueError. Latencies are never gated.
    """
    section = baseline.get(summary["mode"])
    if not section:
        raise ValueError(f"the baseline has no '{summary['mode']}' section; write one with --write-baseline")
    if sorted(section["ids"]) != sorted(summary["ids"]):
        raise ValueError(
            f"this run covers other questions than the '{summary['mode']}' baseline "
            f"({len(summary['ids'])} vs {len(section['ids'])}); run the baseline's questions to compare"
        )
    regressions = []
    overall = summary["rows"].get("all", {})
    for count in ("bad_quotes", "sentinel"):  # must be zero, whatever the baseline says
        if overall.get(count):
            regressions.append(f"all {count}: {overall[count]} (must be 0)")
    for name, base_row in section["rows"].items():
        tolerance = section.get("tolerance", 0.0) if name == "all" else section.get("type_tolerance")
        now_row = summary["rows"].get(name)
        if tolerance is None or now_row is None:
            continue
        for metric in GATED_METRICS:
            before, now = base_row.get(metric), now_row.get(metric)
            if before is None:
                continue
            if now is None or now < before - tolerance - 1e-9:
                shown = "n/a" if now is None else f"{now:.3f}"
                regressions.append(f"{name} {metric}: baseline {before:.3f}, now {shown} (tolerance {tolerance:.2f})")
    return regressions


def comparison_table(summary: dict[str, Any], baseline: dict[str, Any]) -> str:
    """Baseline vs now for the gated metrics of the "all" row."""
    section = baseline.get(summary["mode"]) or {}
    before, now = section.get("rows", {}).get("all", {}), summary["rows"]["all"]
    lines = [f"{'metric':20} {'baseline':>9} {'now':>9} {'change':>8}"]
    for metric in GATED_METRICS:
        if before.get(metric) is None and now.get(metric) is None:
            continue
        b, n = before.get(metric), now.get(metric)
        change = f"{n - b:+.3f}" if b is not None and n is not None else ""
        lines.append(f"{metric:20} {format_cell(b):>9} {format_cell(n):>9} {change:>8}")
    return "\n".join(lines)


def baseline_section(summary: dict[str, Any], previous: dict[str, Any] | None = None) -> dict[str, Any]:
    """A baseline section from a summary, keeping the tolerances of the section it replaces."""
    tolerance, type_tolerance = DEFAULT_TOLERANCE[summary["mode"]]
    previous = previous or {}
    keep = ("mode", "created", "questions", "ids", "settings", "llm", "wall_seconds", "rows")
    section = {k: summary[k] for k in keep if k in summary}
    section["tolerance"] = previous.get("tolerance", tolerance)
    section["type_tolerance"] = previous.get("type_tolerance", type_tolerance)
    return section


# -- command line ----------------------------------------------------------------------------
