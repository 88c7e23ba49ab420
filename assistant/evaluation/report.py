"""Summaries and reports: figures per question type plus "all", the tables, the
precision/coverage curve, and the files of a run (results.jsonl, summary.json, summary.md, plots).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..config import Settings
from .dataset import REPORTS_DIR, TYPES
from .metrics import LATENCY_STAGES, RETRIEVAL_METRICS, fact_found, mean, percentile, refusal_rates


def _row(results: Sequence[dict[str, Any]], full: bool) -> dict[str, Any]:
    row: dict[str, Any] = {"n": len(results)}
    for metric in RETRIEVAL_METRICS:
        row[metric] = mean(r["scores"].get(metric) for r in results)
    if full:
        for metric in ("gold_cited", "citation_precision", "citation_recall", "fact_recall", "supported_share",
                       "near_miss_named", "premise_accepted", "language_match", "recall_with_related"):
            row[metric] = mean(r["scores"].get(metric) for r in results)
        row["contradictions"] = sum(int(r["scores"].get("contradiction") or 0) for r in results)
        row["vacuous"] = sum(int(r["scores"].get("vacuous") or 0) for r in results)
        row["bad_quotes"] = sum(int(r.get("bad_quotes", 0)) for r in results)
        row["sentinel"] = sum(bool(r.get("sentinel")) for r in results)
        row["refusal_rate"], row["false_refusal_rate"] = refusal_rates(
            [bool(r.get("refused")) for r in results], [bool(r["gold"]) for r in results]
        )
        row["llm_failed"] = sum(bool(r.get("llm_failed")) for r in results)
    row["errors"] = sum("error" in r for r in results)
    for stage in LATENCY_STAGES:
        values = [r["timings"].get(stage) for r in results]
        row[f"{stage}_p50"], row[f"{stage}_p95"] = percentile(values, 50), percentile(values, 95)
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}


def summarize(
    results: Sequence[dict[str, Any]], settings: Settings | None = None, meta: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Figures per question type and for "all"; metrics that do not apply to a row are None."""
    full = any("answer" in r for r in results)
    present = [t for t in TYPES if any(r["type"] == t for r in results)]
    rows = {t: _row([r for r in results if r["type"] == t], full) for t in present}
    rows["all"] = _row(results, full)
    summary: dict[str, Any] = {
        "mode": "full" if full else "retrieval-only",
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "questions": len(results),
        "ids": [r["id"] for r in results],
        "rows": rows,
    }
    if settings is not None:
        summary["settings"] = settings_snapshot(settings)
    if meta:
        summary.update(meta)
    return summary


def settings_snapshot(settings: Settings) -> dict[str, Any]:
    """The settings that shape the figures (never API keys)."""
    names = ("embedding", "fusion", "dense_weight", "k", "candidates", "min_relevance", "chunk_size", "chunk_overlap",
             "llm_backend", "llm_model", "llm_base_url", "context_papers", "sentences_per_paper", "support_threshold",
             "extractive_threshold", "temperature", "max_answer_tokens")
    return {name: (str(v) if isinstance(v := getattr(settings, name), Path) else v) for name in names}


_LABELS = {
    "n": "n", "hit@1": "hit@1", "hit@5": "hit@5", "mrr": "MRR", "recall@5": "recall@5",
    "gold_cited": "cited gold", "citation_precision": "cite prec", "citation_recall": "cite rec",
    "fact_recall": "facts", "refusal_rate": "refusal", "false_refusal_rate": "false ref",
    "supported_share": "supported", "near_miss_named": "near-miss named", "bad_quotes": "bad quotes",
    "sentinel": "sentinel", "contradictions": "contradictions", "vacuous": "vacuous", "premise_accepted": "premise accepted",
    "language_match": "same language", "recall_with_related": "rec + related", "retrieve_p50": "retr p50 s", "retrieve_p95": "retr p95 s",
    "first_token_p50": "1st tok p50 s", "first_token_p95": "1st tok p95 s", "total_p50": "total p50 s",
    "total_p95": "total p95 s",
}


def format_cell(value: Any, seconds: bool = False) -> str:
    if value is None:
        return "–"
    if isinstance(value, int):
        return str(value)
    return f"{value:.2f}" if seconds and value >= 1 else f"{value:.3f}"


def format_table(summary: dict[str, Any]) -> str:
    """Markdown tables of the summary: retrieval, then (full runs) answers and latency."""
    full = summary["mode"] == "full"
    groups = [["n", *RETRIEVAL_METRICS, "retrieve_p50", "retrieve_p95"]]
    if full:
        groups.append(["n", "gold_cited", "citation_precision", "citation_recall", "recall_with_related", "fact_recall", "refusal_rate",
                       "false_refusal_rate", "supported_share", "near_miss_named", "contradictions", "vacuous", "premise_accepted",
                       "language_match", "bad_quotes", "sentinel"])
        groups.append(["n", "first_token_p50", "first_token_p95", "total_p50", "total_p95"])
    tables = []
    for columns in groups:
        lines = ["| type | " + " | ".join(_LABELS[c] for c in columns) + " |",
                 "|---|" + "---:|" * len(columns)]
        for name, row in summary["rows"].items():
            cells = [format_cell(row.get(c), seconds=c.endswith(("_p50", "_p95"))) for c in columns]
            lines.append(f"| {'**all**' if name == 'all' else name} | " + " | ".join(cells) + " |")
        tables.append("\n".join(lines))
    return "\n\n".join(tables)


# -- the report ------------------------------------------------------------------------------


def _misses(results: Sequence[dict[str, Any]]) -> list[str]:
    lines = []
    for r in results:
        s = r["scores"]
        problems = []
        if "error" in r:
            problems.append(r["error"])
        if s.get("hit@5") == 0.0:
            problems.append("no gold paper in the top 5")
        elif s.get("recall@5") is not None and s["recall@5"] < 1:
            problems.append(f"recall@5 {s['recall@5']:.2f}")
        if "answer" in r:
            if r["gold"] and r.get("refused"):
                problems.append("refused an answerable question")
            if not r["gold"] and not r.get("refused"):
                problems.append("answered an unanswerable question")
            if r["gold"] and not r.get("refused") and s.get("gold_cited") == 0.0:
                problems.append("cited no gold paper")
            if s.get("fact_recall") is not None and s["fact_recall"] < 1 and not r.get("refused"):
                missing = [f for f in r["facts"] if not fact_found(f, r["answer"])]
                problems.append("facts missing: " + "; ".join(missing))
        if problems:
            lines.append(f"- **{r['id']}** ({r['type']}) {r['question'][:90]} — " + "; ".join(problems))
    return lines


def coverage_curve(results: Sequence[dict[str, Any]]) -> list[dict[str, float]]:
    """Answered-precision against coverage as the answer threshold on `confidence` rises.

    At threshold t a question counts as answered when the assistant answered it and its
    confidence is at least t. Precision: answered questions that are answerable and cite a gold
    paper, over all answered. Coverage: answerable questions answered with a gold citation, over
    all answerable questions. Full runs only; an empty list otherwise.
    """
    rows = [r for r in results if "answer" in r and "error" not in r]
    if not rows:
        return []
    answerable = [r for r in rows if r["gold"]]
    points = []
    for t in sorted({0.0, *(round(float(r.get("confidence", 0.0)), 2) for r in rows)}):
        answered = [r for r in rows if not r.get("refused") and not r.get("llm_failed") and r.get("confidence", 0) >= t]
        right = [r for r in answered if r["gold"] and r["scores"].get("gold_cited")]
        points.append({
            "threshold": t,
            "answered": len(answered),
            "precision": round(len(right) / len(answered), 4) if answered else 1.0,
            "coverage": round(len(right) / len(answerable), 4) if answerable else 0.0,
        })
    return points


def _plots(results: Sequence[dict[str, Any]], summary: dict[str, Any], folder: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def save(fig: Any, name: str) -> Path:
        fig.tight_layout()
        fig.savefig(folder / name, dpi=110)
        plt.close(fig)
        return folder / name

    written = []
    full = summary["mode"] == "full"
    rows = summary["rows"]
    names = list(rows)
    metrics = ["hit@5", "mrr", "recall@5"] + (["gold_cited", "fact_recall", "refusal_rate"] if full else [])
    fig, ax = plt.subplots(figsize=(max(7, 1.2 * len(names)), 4.2))
    width = 0.8 / len(metrics)
    for i, metric in enumerate(metrics):
        values = [rows[n].get(metric) for n in names]
        xs = [j + (i - (len(metrics) - 1) / 2) * width for j in range(len(names))]
        ax.bar(xs, [v if v is not None else 0 for v in values], width, label=_LABELS[metric])
    ax.set_xticks(range(len(names)), [f"{n}\n(n={rows[n]['n']})" for n in names], fontsize=8)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("score")
    ax.set_title(f"Per question type ({summary['mode']}, {summary['questions']} questions)")
    ax.legend(fontsize=8, ncol=len(metrics), loc="upper center", bbox_to_anchor=(0.5, -0.18))
    ax.grid(axis="y", alpha=0.3)
    written.append(save(fig, "per_type.png"))

    stages = [s for s in LATENCY_STAGES if any(r["timings"].get(s) is not None for r in results)]
    if not full:
        stages = [s for s in stages if s != "total"]  # the same as retrieve without an LLM
    fig, ax = plt.subplots(figsize=(6.5, 4))
    data = [[r["timings"][s] for r in results if r["timings"].get(s) is not None] for s in stages]
    if data:
        ax.boxplot(data, tick_labels=stages, showfliers=True)
    ax.set_ylabel("seconds")
    if data and min(min(d) for d in data) > 0 and max(max(d) for d in data) / min(min(d) for d in data) > 50:
        ax.set_yscale("log")
    ax.set_title(f"Latency per question ({summary['mode']})")
    ax.grid(axis="y", alpha=0.3)
    written.append(save(fig, "latency.png"))

    curve = coverage_curve(results)
    if curve:
        fig, ax = plt.subplots(figsize=(5.5, 4.2))
        ax.plot([p["coverage"] for p in curve], [p["precision"] for p in curve], marker=".")
        for p in curve[:: max(1, len(curve) // 8)]:
            ax.annotate(f"{p['threshold']:.2f}", (p["coverage"], p["precision"]), fontsize=7)
        ax.set_xlabel("coverage (answerable questions answered with a gold citation)")
        ax.set_ylabel("answered precision")
        ax.set_xlim(0, 1.02)
        ax.set_ylim(0, 1.02)
        ax.set_title("Precision against coverage over the answer threshold")
        ax.grid(alpha=0.3)
        written.append(save(fig, "coverage.png"))
    return written


def _curve_table(results: Sequence[dict[str, Any]]) -> list[str]:
    curve = coverage_curve(results)
    if not curve:
        return []
    lines = ["## Precision against coverage over the answer threshold", "",
             "| threshold | answered | precision | coverage |", "|---:|---:|---:|---:|"]
    step = max(1, len(curve) // 15)
    for p in curve[::step] + ([curve[-1]] if (len(curve) - 1) % step else []):
        lines.append(f"| {p['threshold']:.2f} | {p['answered']} | {p['precision']:.3f} | {p['coverage']:.3f} |")
    return [*lines, ""]


def write_report(results: Sequence[dict[str, Any]], summary: dict[str, Any], out_dir: Path | str = REPORTS_DIR) -> Path:
    """Write <out_dir>/<timestamp>/ with results.jsonl, summary.json, summary.md, per_type.png, latency.png."""
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    folder = Path(out_dir) / stamp
    suffix = 1
    while folder.exists():
        suffix += 1
        folder = Path(out_dir) / f"{stamp}-{suffix}"
    folder.mkdir(parents=True)
    with open(folder / "results.jsonl", "w", encoding="utf-8") as handle:
        for result in results:
            handle.write(json.dumps(result, ensure_ascii=False) + "\n")
    (folder / "summary.json").write_text(json.dumps(summary, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    settings = summary.get("settings", {})
    header = [
        f"# Evaluation: {summary['mode']}, {summary['questions']} questions",
        "",
        f"Run {summary['created']}"
        + (f", wall time {summary['wall_seconds']:.0f} s" if "wall_seconds" in summary else "")
        + (f", LLM: {summary['llm']}" if summary.get("llm") else "") + ".",
    ]
    if settings:
        header.append("Settings: " + ", ".join(f"{k}={v}" for k, v in settings.items() if v is not None) + ".")
    misses = _misses(results)
    body = [
        *header, "", format_table(summary), "",
        "Metrics: hit@k / MRR / recall@5 over the ranked papers (k=5); cited gold = an answer cites a gold paper; "
        "facts = share of the question's facts stated in the answer (number-aware); refusal = refusals on "
        "unanswerable questions; false ref = refusals on answerable ones; supported = share of answer sentences "
        "the verifier found supported (refusals n/a). Latencies in seconds. – = not applicable.",
        "", "![per type](per_type.png) ![latency](latency.png)"
        + (" ![coverage](coverage.png)" if summary["mode"] == "full" else ""), "",
        *_curve_table(results),
        f"## Questions with problems ({len(misses)})", "", *(misses or ["None."]), "",
    ]
    (folder / "summary.md").write_text("\n".join(body), encoding="utf-8")
    _plots(results, summary, folder)
    return folder
