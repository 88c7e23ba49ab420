"""Answers as a user waits for them: time to the papers on screen, to the first word and to the
whole answer over a fixed dev set of every question type, and the first question after start-up."""

from __future__ import annotations

import time
from typing import Any

from assistant.api import Assistant
from assistant.types import Answer, Evidence

from .inputs import DEV_TYPES, dev_questions
from .measure import fmt_s, note, print_contention, proc_mem, r, say, seconds_stats
from .state import Run, new_model_session


def timed_events(a: Assistant, question: str, history: list[dict[str, str]]) -> dict[str, Any]:
    """What a user waits for, measured where a user sees it: the papers being read (`Evidence`),
    the first word of the answer, the whole answer; with the size of the prompt the model read."""
    mark = time.perf_counter()
    evidence_s = first_s = None
    final: Answer | None = None
    for event in a.events(question, history=history):
        now = time.perf_counter() - mark
        if isinstance(event, Evidence):
            evidence_s = evidence_s if evidence_s is not None else now  # the first papers on screen
        elif isinstance(event, str):
            first_s = first_s if first_s is not None else now
        else:
            final = event
    assert final is not None
    return {
        "evidence_s": r(evidence_s, 3), "first_token_s": r(first_s, 3), "total_s": r(time.perf_counter() - mark, 3),
        "prompt_tokens": final.prompt_tokens, "status": final.status,
        "condense_s": r(final.timings.get("condense"), 3),
    }


def answer_latency_section(run: Run) -> None:
    """Time to evidence, to the first token and to the whole answer over a fixed dev set of every type."""
    if run.args.skip_llm:
        return
    assert run.a_real is not None
    al = run.rep.section("answer_latency", "Answers as a user waits for them (dev set, every question type)")
    questions = dev_questions(run.args.dev_per_type)

    def ask_all() -> list[dict[str, Any]]:
        assert run.a_real is not None
        return [timed_events(run.a_real, q["question"], q.get("history") or []) | {"id": q["id"], "type": q["type"]}
                for q in questions]

    with run.meter.measure(al):
        first = ask_all()
        # Each question's first paper is now on disk, kept when it was read above (or by `assistant warm`).
        new_model_session(run, lambda: run.a_real.warm_up(background=False))
        rows = ask_all()
    for row in rows:
        note(f"{row['id']} {row['type']}: evidence {row['evidence_s']} s, first token {row['first_token_s']} s, "
             f"total {row['total_s']} s, prompt {row['prompt_tokens']} tokens")
    al["questions"], al["questions_first_reading"] = rows, first
    say("  in a new session, each question's first paper kept on disk (read once before, or by `assistant warm`):")
    say(f"  {'type':<13} {'n':>2}  {'evidence p50':>12}  {'first token p50':>15}  {'answer p50':>10}  {'prompt tokens':>13}")
    for kind in DEV_TYPES:
        of_kind = [x for x in rows if x["type"] == kind]
        if not of_kind:
            continue
        ev, ft, tot = (seconds_stats([x[key] for x in of_kind]) for key in ("evidence_s", "first_token_s", "total_s"))
        tokens = [x["prompt_tokens"] for x in of_kind if x["prompt_tokens"]]
        say(
            f"  {kind:<13} {len(of_kind):>2}  {ev['p50_s'] if ev['n'] else '–':>12}  "
            f"{ft['p50_s'] if ft['n'] else '–':>15}  {tot['p50_s']:>10}  "
            f"{round(sum(tokens) / len(tokens)) if tokens else '–':>13}"
        )
    single = [x for x in rows if x["type"] not in ("follow_up", "chinese")]
    rewritten = [x for x in rows if x["type"] in ("follow_up", "chinese")]
    al["evidence"] = seconds_stats([x["evidence_s"] for x in rows])
    al["first_token_single_turn"] = seconds_stats([x["first_token_s"] for x in single])
    al["first_token_follow_up_and_chinese"] = seconds_stats([x["first_token_s"] for x in rewritten])
    al["answer"] = seconds_stats([x["total_s"] for x in rows])
    al["first_reading"] = {
        "first_token_single_turn": seconds_stats([x["first_token_s"] for x in first if x["type"] not in ("follow_up", "chinese")]),
        "first_token_follow_up_and_chinese": seconds_stats([x["first_token_s"] for x in first if x["type"] in ("follow_up", "chinese")]),
        "answer": seconds_stats([x["total_s"] for x in first]),
    }
    with_prompt = [x["prompt_tokens"] for x in rows if x["prompt_tokens"]]
    al["mean_prompt_tokens"] = round(sum(with_prompt) / len(with_prompt)) if with_prompt else None
    say(f"  time to evidence (papers on screen):          {fmt_s(al['evidence'])}")
    say(f"  time to first token, single-turn questions:   {fmt_s(al['first_token_single_turn'])}")
    say(f"  time to first token, follow-ups and Chinese:  {fmt_s(al['first_token_follow_up_and_chinese'])}")
    say(f"  whole answer:                                 {fmt_s(al['answer'])}")
    fr = al["first_reading"]
    say(f"  the same questions when their papers were read for the first time: first token single-turn "
        f"{fmt_s(fr['first_token_single_turn'])}; follow-ups and Chinese {fmt_s(fr['first_token_follow_up_and_chinese'])}; "
        f"whole answer {fmt_s(fr['answer'])}")
    say(f"  prompt per answer: {al['mean_prompt_tokens']} tokens on average (tiktoken count; the instructions and the "
        "first paper's abstract among them come from the kept state)")
    print_contention(al)


def first_question_section(run: Run) -> None:
    """The first question after start-up, as `assistant serve` meets it: a fresh assistant loads the
    model in the background and reads the fixed instructions; the question comes once it is ready."""
    if run.args.skip_llm:
        return
    assert run.a_real is not None
    fq = run.rep.section("first_question", "The first question after start-up (serve: warm start)")
    settings = run.a_real.settings
    if run.server_pid:
        run.server_memory = proc_mem(run.server_pid)
    run.a_real.close()  # its model server must not share the cores with the new one
    questions = [q for q in dev_questions(3) if q["type"] == "fact"]
    with run.meter.measure(fq):
        mark = time.perf_counter()
        fresh = run.ctx.keep(Assistant.from_settings(settings))
        opened = time.perf_counter() - mark
        thread = fresh.warm_up()
        assert thread is not None
        thread.join()
        ready = time.perf_counter() - mark
        first = timed_events(fresh, questions[0]["question"], [])
        second = timed_events(fresh, questions[1]["question"], [])
    fq.update({"open_s": r(opened, 3), "ready_s": r(ready, 3), "warm_error": fresh.warm_error,
               "first": first, "second": second})
    if first["first_token_s"] and second["first_token_s"]:
        fq["first_minus_second_s"] = r(first["first_token_s"] - second["first_token_s"], 3)
    say(f"  open {opened:.2f} s; model loaded and the instructions read: ready {ready:.2f} s after start")
    say(f"  first question: first token {first['first_token_s']} s, answer {first['total_s']} s "
        f"({first['prompt_tokens']} prompt tokens)")
    say(f"  next question:  first token {second['first_token_s']} s, answer {second['total_s']} s "
        f"({second['prompt_tokens']} prompt tokens)")
    if "first_minus_second_s" in fq:
        say(f"  first question's first token minus the next one's: {fq['first_minus_second_s']:+.2f} s")
    print_contention(fq)
    fresh.close()
