"""Evaluation harness: scoring a question, summaries and reports, the regression gate, the evaluation
set, the CLI (the metric functions themselves are in test_metrics.py)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from assistant import Assistant
from assistant import cli
from assistant import evaluation as ev
from assistant.evaluation import check, fact_found, score_question, summarize, write_report

A, B, C, D, E, F = (ev.paper_key("file.txt", i) for i in range(1, 7))
# One question of each type, for the small live run.
SMALL_RUN = ["q001", "q028", "q044", "q065", "q080", "q092", "q108", "q121", "q011", "q084"]


# -- scoring one question ------------------------------------------------------------------


def _question(qid: str, qtype: str, gold: list[int], facts: list[str]) -> dict:
    return {"id": qid, "type": qtype, "question": f"question {qid}?", "history": [],
            "gold": [{"source": "file.txt", "ordinal": o} for o in gold], "facts": facts}


def test_score_question_treats_refusals_as_stating_nothing() -> None:
    q = _question("q1", "fact", [1], ["0.709"])
    refused = {"text": "The abstracts do not contain 0.709.", "refused": True, "cited": [A], "supported_share": 1.0}
    scores = score_question(q, [B, A], refused)
    assert scores["gold_rank"] == 2 and scores["hit@1"] == 0.0 and scores["hit@5"] == 1.0 and scores["mrr"] == 0.5
    assert scores["fact_recall"] == 0.0 and scores["gold_cited"] == 0.0 and scores["citation_precision"] is None
    assert scores["refused"] is True and scores["supported_share"] is None

    answered = {"text": "It reaches 0.709 [1].", "refused": False, "cited": [A], "supported_share": 1.0}
    scores = score_question(q, [A], answered)
    assert scores["fact_recall"] == 1.0 and scores["gold_cited"] == 1.0 and scores["supported_share"] == 1.0

    unanswerable = score_question(_question("q2", "unanswerable", [], []), [A], answered)
    assert unanswerable["hit@5"] is None and unanswerable["gold_cited"] is None and unanswerable["fact_recall"] is None


# -- full-answer summaries and reports on hand-built results ------------------------------------


def _full_result(q: dict, retrieved: list[str], text: str, refused: bool, cited: list[str], share: float | None,
                 first_token: float | None, total: float) -> dict:
    citations = [{"marker": i, "paper": {"id": c, "title": "T"}, "quote": "q"} for i, c in enumerate(cited, 1)]
    timings = {"retrieve": 0.05, "total": total, **({"first_token": first_token} if first_token else {})}
    answer = {"text": text, "refused": refused, "cited": cited, "supported_share": share}
    return {
        "id": q["id"], "type": q["type"], "question": q["question"], "history": [], "facts": q["facts"],
        "gold": [ev.paper_key(g["source"], g["ordinal"]) for g in q["gold"]],
        "retrieved": [{"paper": r, "title": "T", "score": 0.5} for r in retrieved],
        "answer": text, "refused": refused, "llm_failed": False, "citations": citations, "flagged": [], "notices": [],
        "timings": timings, "scores": score_question(q, retrieved, answer),
    }


def hand_built_full_results() -> list[dict]:
    fact = _question("f1", "fact", [1], ["0.709", "0.676"])
    multi = _question("m1", "multi_paper", [2, 3], ["Alpha", "Beta"])
    unanswerable = _question("u1", "unanswerable", [], [])
    unanswerable2 = _question("u2", "unanswerable", [], [])
    return [
        _full_result(fact, [A, B], "It reaches 0.709 AUROC, ahead of 0.676 [1].", False, [A], 1.0, 2.0, 10.0),
        _full_result(multi, [B, D, C], "Alpha does this [1]. So does Delta [2].", False, [B, D], 0.5, 3.0, 20.0),
        _full_result(unanswerable, [E], "The abstracts do not contain the answer.", True, [], None, None, 1.0),
        _full_result(unanswerable2, [E], "It uses 8 GPUs [1].", False, [E], 0.0, 4.0, 30.0),
    ]


def test_summarize_full_answers_per_type_and_all() -> None:
    summary = summarize(hand_built_full_results())
    assert summary["mode"] == "full" and summary["questions"] == 4
    assert list(summary["rows"]) == ["fact", "multi_paper", "unanswerable", "all"]
    fact, multi, unans, total = (summary["rows"][k] for k in ("fact", "multi_paper", "unanswerable", "all"))
    assert fact["hit@1"] == 1.0 and fact["fact_recall"] == 1.0 and fact["gold_cited"] == 1.0
    assert fact["refusal_rate"] is None and fact["false_refusal_rate"] == 0.0
    assert multi["hit@1"] == 1.0 and multi["recall@5"] == 1.0 and multi["citation_precision"] == 0.5
    assert multi["citation_recall"] == 0.5 and multi["fact_recall"] == 0.5
    assert unans["refusal_rate"] == 0.5 and unans["false_refusal_rate"] is None and unans["hit@5"] is None
    assert unans["gold_cited"] is None
    assert total["n"] == 4 and total["refusal_rate"] == 0.5 and total["false_refusal_rate"] == 0.0
    assert total["supported_share"] == 0.5  # (1.0 + 0.5 + 0.0) / 3, the refusal is n/a
    assert total["first_token_p50"] == 3.0 and total["total_p50"] == 15.0
    assert total["total_p95"] == pytest.approx(28.5)


def test_full_answer_report_files(tmp_path: Path) -> None:
    results = hand_built_full_results()
    summary = summarize(results, meta={"wall_seconds": 61.0, "llm": "hand-built"})
    folder = write_report(results, summary, tmp_path)
    assert folder.parent == tmp_path
    _assert_report(folder, results)
    markdown = (folder / "summary.md").read_text(encoding="utf-8")
    assert "cited gold" in markdown and "false ref" in markdown and "1st tok p50 s" in markdown
    assert "answered an unanswerable question" in markdown and "facts missing: Beta" in markdown
    assert write_report(results, summary, tmp_path) != folder  # a second report in the same second gets its own folder


def _assert_report(folder: Path, results: list[dict]) -> None:
    expected = {"results.jsonl", "summary.json", "summary.md", "per_type.png", "latency.png"}
    if any("answer" in r for r in results):
        expected.add("coverage.png")  # full runs: precision against coverage over the answer threshold
    assert {p.name for p in folder.iterdir()} == expected
    lines = (folder / "results.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["id"] for line in lines] == [r["id"] for r in results]
    summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    assert summary["questions"] == len(results) and "all" in summary["rows"]
    markdown = (folder / "summary.md").read_text(encoding="utf-8")
    assert "| type |" in markdown and "| **all** |" in markdown
    for name in ("per_type.png", "latency.png"):
        data = (folder / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 2000


def test_coverage_curve_trades_precision_for_coverage_as_the_threshold_rises() -> None:
    results = hand_built_full_results()
    for result, confidence in zip(results, (0.9, 0.7, 0.3, 0.5)):
        result["confidence"] = confidence
    curve = ev.coverage_curve(results)
    assert [p["threshold"] for p in curve] == [0.0, 0.3, 0.5, 0.7, 0.9]
    at = {p["threshold"]: p for p in curve}
    # Everything answered: the fact, the multi-paper and the wrongly answered unanswerable one.
    assert at[0.0]["answered"] == 3 and at[0.0]["precision"] == pytest.approx(2 / 3, abs=1e-3) and at[0.0]["coverage"] == 1.0
    # Above the wrong answer's confidence only right answers remain.
    assert at[0.7]["answered"] == 2 and at[0.7]["precision"] == 1.0 and at[0.7]["coverage"] == 1.0
    assert at[0.9]["answered"] == 1 and at[0.9]["coverage"] == 0.5
    retrieval_only = [{k: v for k, v in r.items() if k != "answer"} for r in results]
    assert ev.coverage_curve(retrieval_only) == []


def test_a_quote_that_is_not_a_contiguous_passage_of_its_abstract_is_counted() -> None:
    abstract = "First sentence. Second sentence. Third sentence."
    abstracts = {"f-001": abstract}
    paper = {"id": "f-001"}
    good = {"paper": paper, "quote": "Second sentence.", "spans": [{"start": 16, "end": 32, "text": "Second sentence."}]}
    glued = {"paper": paper, "quote": "First sentence. Third sentence.", "spans": []}
    misplaced = {"paper": paper, "quote": "Third sentence.", "spans": [{"start": 0, "end": 15, "text": "Third sentence."}]}
    assert ev.quote_problems([good], abstracts) == 0
    assert ev.quote_problems([glued], abstracts) == 1
    assert ev.quote_problems([misplaced], abstracts) == 1


def test_sentinel_fragments_are_detected_in_any_case() -> None:
    assert ev.has_sentinel("Vegas is fast [1]. Not_IN_SOURCES")
    assert ev.has_sentinel("not in sources")
    assert not ev.has_sentinel("Vegas is fast [1].")


def test_a_near_miss_refusal_counts_as_named_only_when_it_cites_the_paper_asked_about() -> None:
    q = {**_question("n1", "near_miss", [], []), "about": [{"source": "file.txt", "ordinal": 1}]}
    named = score_question(q, [A], {"text": "The A abstract [1] does not give X.", "refused": True, "cited": [A]})
    vague = score_question(q, [A], {"text": "The abstracts do not contain it.", "refused": True, "cited": []})
    answered = score_question(q, [A], {"text": "It uses 8 GPUs [1].", "refused": False, "cited": [A]})
    assert named["near_miss_named"] == 1.0 and vague["near_miss_named"] == 0.0 and answered["near_miss_named"] == 0.0
    assert named["refused"] and not answered["refused"]


def test_a_near_miss_answered_about_its_paper_counts_as_vacuous() -> None:
    q = {**_question("n1", "near_miss", [], []), "about": [{"source": "file.txt", "ordinal": 1}]}
    answered = score_question(q, [A], {"text": "A was fine-tuned from a large language model [1].", "refused": False, "cited": [A]})
    refused = score_question(q, [A], {"text": "The A abstract [1] does not give X.", "refused": True, "cited": [A]})
    assert answered["vacuous"] == 1.0 and refused["vacuous"] == 0.0
    assert score_question(_question("f1", "fact", [], []), [A], {"text": "x", "refused": False, "cited": [A]})["vacuous"] is None


# -- the regression gate ---------------------------------------------------------------------


def _baseline_for(summary: dict, tolerance: float = 0.05, type_tolerance: float | None = 0.1) -> dict:
    section = ev.baseline_section(summary)
    section["tolerance"], section["type_tolerance"] = tolerance, type_tolerance
    return {summary["mode"]: section}


def test_check_reports_drops_beyond_tolerance_only() -> None:
    summary = summarize(hand_built_full_results())
    baseline = _baseline_for(summary)
    assert check(summary, baseline) == []

    within = copy.deepcopy(summary)
    within["rows"]["all"]["fact_recall"] -= 0.04
    within["rows"]["all"]["false_refusal_rate"] = 0.9  # not gated (lower is better)
    within["rows"]["all"]["total_p95"] = 999.0  # latencies are never gated
    assert check(within, baseline) == []

    beyond = copy.deepcopy(summary)
    beyond["rows"]["all"]["fact_recall"] -= 0.06
    beyond["rows"]["multi_paper"]["recall@5"] = 0.85
    beyond["rows"]["all"]["hit@1"] += 0.2  # improvements are fine
    problems = check(beyond, baseline)
    assert len(problems) == 2
    assert any(p.startswith("all fact_recall: baseline ") and "tolerance 0.05" in p for p in problems)
    assert any(p.startswith("multi_paper recall@5: baseline 1.000, now 0.850") for p in problems)

    # A slice baseline (type rows not gated) ignores per-type drops.
    slice_problems = check(beyond, _baseline_for(summary, type_tolerance=None))
    assert len(slice_problems) == 1 and slice_problems[0].startswith("all fact_recall")


def test_check_fails_on_any_quote_that_is_not_a_passage_or_any_sentinel_fragment() -> None:
    summary = summarize(hand_built_full_results())
    baseline = _baseline_for(summary)
    broken = copy.deepcopy(summary)
    broken["rows"]["all"]["bad_quotes"], broken["rows"]["all"]["sentinel"] = 1, 2
    assert check(broken, baseline) == ["all bad_quotes: 1 (must be 0)", "all sentinel: 2 (must be 0)"]


def test_check_refuses_to_compare_different_question_sets() -> None:
    summary = summarize(hand_built_full_results())
    baseline = _baseline_for(summary)
    fewer = summarize(hand_built_full_results()[:2])
    with pytest.raises(ValueError, match="other questions"):
        check(fewer, baseline)
    with pytest.raises(ValueError, match="no 'retrieval-only' section"):
        check({**summary, "mode": "retrieval-only"}, baseline)


# -- the evaluation set and the committed baseline --------------------------------------------


def test_the_evaluation_set_is_consistent_with_the_corpus(bundled_assistant: Assistant) -> None:
    questions = ev.load_questions()
    assert len(questions) >= 200 and {q["type"] for q in questions} == set(ev.TYPES)
    counts = {t: sum(q["type"] == t for q in questions) for t in ev.TYPES}
    assert counts["paraphrase"] >= 51 and counts["near_miss"] >= 30 and counts["topic"] >= 12
    assert counts["comparison"] >= 6
    papers = {ev.paper_key(p.source, p.ordinal): p for p in bundled_assistant.papers}
    for q in questions:
        gold = [ev.paper_key(g["source"], g["ordinal"]) for g in q["gold"]]
        assert all(g in papers for g in gold), q["id"]
        assert bool(q["history"]) == (q["type"] == "follow_up"), q["id"]
        assert bool(q["facts"]) == bool(gold) or q["type"] == "topic", q["id"]  # a topic's answer is its papers
        about = [ev.paper_key(g["source"], g["ordinal"]) for g in q.get("about", [])]
        assert all(a in papers for a in about) and bool(about) == (q["type"] in ("near_miss", "false_premise")), q["id"]
        abstracts = " ".join(papers[g].abstract for g in gold)
        assert all(fact_found(f, abstracts) for f in q["facts"]), f"{q['id']}: a fact is not in its gold abstracts"


def test_the_committed_baseline_is_well_formed() -> None:
    baseline = json.loads(ev.BASELINE_PATH.read_text(encoding="utf-8"))
    ids = {q["id"] for q in ev.load_questions()}
    retrieval = baseline["retrieval-only"]
    assert set(retrieval["ids"]) == ids and retrieval["questions"] == len(ids)
    assert 0 < retrieval["tolerance"] < 0.2 and set(retrieval["rows"]) == {*ev.TYPES, "all"}
    full = baseline["full"]  # the answers' CI gate: at least 30 questions covering every type
    assert set(full["ids"]) <= ids and len(full["ids"]) >= 30 and full["tolerance"] > 0
    slice_types = {q["type"] for q in ev.load_questions() if q["id"] in set(full["ids"])}
    assert slice_types == set(ev.TYPES)


# -- a small live run (retrieval only) and the command line ------------------------------------


def test_retrieval_only_run_writes_a_well_formed_report(bundled_assistant: Assistant, tmp_path: Path) -> None:
    questions = ev.select_questions(ev.load_questions(), ids=SMALL_RUN)
    assert len(questions) == 10
    calls = []
    results = ev.run_eval(bundled_assistant, questions, retrieval_only=True, progress=lambda d, t: calls.append((d, t)))
    assert calls[-1] == (10, 10) and len(results) == 10
    for result in results:
        assert len(result["retrieved"]) == 5 and "answer" not in result and "error" not in result
        ids = {p.id for p in bundled_assistant.papers}
        assert all(r["paper"] in ids and isinstance(r["score"], float) for r in result["retrieved"])
        assert result["timings"]["retrieve"] > 0
    follow_up = next(r for r in results if r["type"] == "follow_up")
    assert follow_up["search_query"].startswith(follow_up["question"]) and len(follow_up["search_query"]) > len(
        follow_up["question"])
    summary = summarize(results, bundled_assistant.settings)
    assert summary["mode"] == "retrieval-only" and summary["settings"]["embedding"] == "minilm"
    assert summary["rows"]["unanswerable"]["hit@5"] is None and 0 <= summary["rows"]["all"]["mrr"] <= 1
    assert "gold_cited" not in summary["rows"]["all"]
    _assert_report(write_report(results, summary, tmp_path), results)


def test_select_questions() -> None:
    questions = ev.load_questions()
    assert [q["id"] for q in ev.select_questions(questions, ids=["q002", "q001"])] == ["q001", "q002"]
    assert {q["type"] for q in ev.select_questions(questions, types=["chinese", "fact"])} == {"chinese", "fact"}
    assert len(ev.select_questions(questions, types=["fact"], limit=3)) == 3
    with pytest.raises(ValueError, match="unknown question ids"):
        ev.select_questions(questions, ids=["q999"])
    with pytest.raises(ValueError, match="unknown question types"):
        ev.select_questions(questions, types=["trivia"])


def test_cli_check_and_write_baseline(bundled_index: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    baseline = tmp_path / "baseline.json"
    common = ["eval", "--retrieval-only", "--index-dir", str(bundled_index), "--out", str(tmp_path / "reports"),
              "--baseline", str(baseline)]
    assert cli.main([*common, "--ids", "q001,q065,q092", "--write-baseline"]) == 0
    written = json.loads(baseline.read_text(encoding="utf-8"))
    assert written["retrieval-only"]["ids"] == ["q001", "q065", "q092"]
    assert "| **all** |" in capsys.readouterr().out

    assert cli.main([*common, "--check"]) == 0  # runs exactly the baseline's questions
    out = capsys.readouterr().out
    assert "No metric fell beyond tolerance." in out and "baseline" in out

    written["retrieval-only"]["rows"]["all"]["mrr"] = 1.5  # pretend the baseline was better
    baseline.write_text(json.dumps(written), encoding="utf-8")
    assert cli.main([*common, "--check"]) == 1
    out = capsys.readouterr().out
    assert "REGRESSION" in out and "all mrr: baseline 1.500" in out

    assert cli.main([*common, "--check", "--ids", "q001"]) == 2  # not the baseline's questions
    assert "other questions" in capsys.readouterr().err
    assert cli.main([*common, "--ids", "q999"]) == 2


def test_the_evaluation_set_is_read_by_the_harness_only() -> None:
    """No other code path or prompt may see the set: no reference to the file, no question text."""
    root = Path(__file__).resolve().parent.parent
    questions = ev.load_questions()
    snippets = [q["question"][:40] for q in questions if len(q["question"]) >= 15]
    for path in [*sorted((root / "assistant").rglob("*.py")), *sorted((root / "prompts").glob("*"))]:
        if "evaluation" in path.relative_to(root).parts or not path.is_file():
            continue
        text = path.read_text(encoding="utf-8")
        assert "questions.jsonl" not in text and "eval/" not in text, path
        leaked = [s for s in snippets if s in text]
        assert not leaked, f"{path.relative_to(root)} contains evaluation questions {leaked}: write other ones"


def test_no_test_uses_a_question_of_the_evaluation_set() -> None:
    """Tests write their own questions: one that repeats an eval question would tune the code to the set."""
    snippets = [q["question"][:40].lower() for q in ev.load_questions() if len(q["question"]) >= 15]
    for path in sorted(Path(__file__).resolve().parent.glob("*.py")):
        text = path.read_text(encoding="utf-8").lower()
        leaked = [s for s in snippets if s in text]
        assert not leaked, f"{path.name} contains evaluation questions {leaked}: write other ones"


def test_retrieval_has_not_regressed_below_the_committed_baseline(bundled_index: Path, tmp_path: Path) -> None:
    # The CI gate of `assistant eval --retrieval-only --check`: every baseline question, real index.
    args = ["eval", "--retrieval-only", "--check", "--index-dir", str(bundled_index), "--out", str(tmp_path)]
    assert cli.main(args) == 0


@pytest.mark.llm
def test_answers_have_not_regressed_below_the_committed_baseline(bundled_index: Path, tmp_path: Path) -> None:
    # The CI gate of `assistant eval --check`: the baseline's full-answer slice (every question type),
    # answered end to end by the embedded model, scored against the committed figures.
    args = ["eval", "--check", "--index-dir", str(bundled_index), "--out", str(tmp_path)]
    assert cli.main(args) == 0
    summary = json.loads(next(tmp_path.glob("*/summary.json")).read_text(encoding="utf-8"))
    assert summary["mode"] == "full" and summary["questions"] >= 30
    assert summary["rows"]["all"]["bad_quotes"] == 0 and summary["rows"]["all"]["sentinel"] == 0
