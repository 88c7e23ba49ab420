"""The judge decides what a user reads: answer, near miss, refusal, correction or "not in this collection".

The model's judgements come from a scripted OpenAI-compatible server that gives first-token
log-probabilities (`first_tokens`), so each test sets what the model "thinks" and checks what the
application makes of it; the embedded model's own judgements are checked end to end in test_answer.py.
"""

from __future__ import annotations

import json

from assistant.judge import DECISION_FEATURES, Fitted
from assistant.kinds import DATA
from assistant.prompts import load_prompts
from support import VEGAS
from fakes import ScriptedLLM, judging_model


def drafts(scripted_llm: ScriptedLLM) -> list[dict]:
    return [r for r in scripted_llm.requests if r.get("stream")]


def test_the_fitted_rules_load_with_every_feature_and_their_figures_on_questions_written_by_others() -> None:
    fitted = Fitted.load()
    assert fitted.with_model.features == DECISION_FEATURES
    assert fitted.without_model.features == DECISION_FEATURES[1:]
    assert {"own", "heldout", "external"} <= set(fitted.figures["answer_rule"])
    premise = json.loads((DATA / "premise.json").read_text(encoding="utf-8"))
    assert fitted.premise_threshold == premise["threshold"] and set(premise["figures"]) == {"fit", "check"}


def test_a_question_about_something_outside_the_collection_is_told_so_and_nothing_is_written(scripted, scripted_llm):
    scripted_llm.first_tokens = judging_model()
    answer = scripted.ask("How do I bake a sourdough loaf with a crisp crust?")
    assert answer.status == "out_of_scope" and answer.refused and answer.citations == []
    assert "outside this collection" in answer.text and drafts(scripted_llm) == []


def test_a_draft_the_abstract_contradicts_is_corrected_with_the_abstracts_own_words(scripted, scripted_llm):
    scripted_llm.first_tokens = judging_model(claim_holds=False, says_otherwise=True)
    scripted_llm.queue(f"{VEGAS} decodes more slowly than default vLLM because drafting adds work [1].")
    answer = scripted.ask(f"How come {VEGAS} decodes more slowly than vLLM does?")
    assert answer.status == "answered" and not answer.refused
    assert answer.text.startswith(f"The {VEGAS} abstract [1] does not support that.")
    (citation,) = answer.citations
    assert citation.paper.title == VEGAS and citation.quote in citation.paper.abstract
    assert "slowly" not in answer.text, "the contradicted claim is not shown as the answer"


def test_a_premise_the_draft_gives_a_reason_for_is_corrected_when_no_sentence_of_the_abstract_states_it(
        scripted, scripted_llm):
    # The whole draft would hold by its reason; its premise, judged against the abstract's sentences, does not.
    scripted_llm.first_tokens = judging_model(claim_holds=True, premise_holds=False)
    scripted_llm.queue(f"{VEGAS} decodes more slowly than default vLLM because drafting adds work [1].")
    answer = scripted.ask(f"Why does {VEGAS} decode more slowly than vLLM?")
    assert answer.text.startswith(f"The {VEGAS} abstract [1] does not support that.")
    assert "slowly" not in answer.text
    assert any(n.endswith(f"does not say: \u201c{VEGAS} decodes more slowly than default vLLM\u201d") for n in answer.notices)


def test_a_draft_whose_premise_a_sentence_states_is_the_answer(scripted, scripted_llm):
    scripted_llm.first_tokens = judging_model(claim_holds=True, premise_holds=True)
    scripted_llm.queue(f"{VEGAS} decodes faster than default vLLM because it drafts with sparse attention [1].")
    answer = scripted.ask(f"Why does {VEGAS} decode faster than vLLM?")
    assert answer.status == "answered" and answer.text.startswith(f"{VEGAS} decodes faster")


def test_a_premise_the_closest_sentence_states_costs_one_judgement_and_one_the_abstract_lacks_three(
        scripted, scripted_llm):
    asked = load_prompts().judge_premise.format(sentence="", statement="").splitlines()[-1]

    def premise_calls() -> int:
        return sum(asked in m["content"] for r in scripted_llm.judged for m in r["messages"])

    for holds, calls in ((True, 1), (False, 3)):
        scripted_llm.judged.clear()
        scripted_llm.first_tokens = judging_model(claim_holds=True, premise_holds=holds)
        scripted_llm.queue(f"{VEGAS} decodes faster than default vLLM because it drafts with sparse attention [1].")
        scripted.ask(f"Why does {VEGAS} decode faster than vLLM?")
        assert premise_calls() == calls


def test_a_draft_the_abstract_does_not_state_becomes_a_near_miss(scripted, scripted_llm):
    scripted_llm.first_tokens = judging_model(claim_holds=False, says_otherwise=False)
    scripted_llm.queue(f"{VEGAS} ran its experiments on eight A100 GPUs [1].")
    answer = scripted.ask(f"On how many GPUs were the {VEGAS} experiments run?")
    assert answer.refused and answer.status == "not_in_abstracts"
    assert answer.text.startswith(f"The {VEGAS} abstract [1] does not answer that question.")
    assert "A100" not in answer.text


def test_a_near_miss_never_quotes_a_sentence_the_judge_finds_answers_it_answers_from_it_instead(scripted, scripted_llm):
    # The model declines, but the judge finds the closest sentence answers: that sentence is the answer.
    scripted_llm.first_tokens = judging_model(sentence=lambda content: True)
    scripted_llm.queue("NOT_IN_SOURCES")
    answer = scripted.ask(f"By how much does {VEGAS} raise decoding throughput over default vLLM?")
    assert answer.status == "answered" and not answer.refused
    assert answer.text.startswith(f"The {VEGAS} abstract says:") and "does not" not in answer.text
    assert any("own sentences" in notice for notice in answer.notices)


def test_a_near_miss_quotes_the_closest_sentence_the_judge_finds_does_not_answer(scripted, scripted_llm):
    scripted_llm.first_tokens = judging_model(sentence=lambda content: False)
    scripted_llm.queue("NOT_IN_SOURCES")
    answer = scripted.ask(f"Which learning rate schedule did {VEGAS} use while drafting?")
    assert answer.refused and answer.text.startswith(f"The {VEGAS} abstract [1] does not answer that question.")
    (citation,) = answer.citations
    assert citation.paper.title == VEGAS and f"“{' '.join(citation.quote.split())}”" in " ".join(answer.text.split())


def test_a_refusal_in_reply_to_a_chinese_question_is_written_in_chinese(scripted, scripted_llm):
    scripted_llm.first_tokens = judging_model()
    scripted_llm.queue("How do I bake sourdough bread?")  # the model's English rewrite of the question
    answer = scripted.ask("怎么烤出外皮酥脆的酸面包？")
    assert answer.refused and "论文集" in answer.text


def test_the_model_is_asked_to_answer_a_chinese_question_in_chinese(scripted, scripted_llm):
    scripted_llm.first_tokens = judging_model(claim_holds=True)
    scripted_llm.queue(f"How much faster is {VEGAS} than default vLLM?", f"{VEGAS} 比默认的 vLLM 快 1.25×–2.81× [1]。")
    answer = scripted.ask(f"{VEGAS} 比默认的 vLLM 快多少？")
    (draft,) = drafts(scripted_llm)[-1:]
    assert "请用中文回答" in draft["messages"][-1]["content"]
    assert answer.status == "answered" and "快" in answer.text


def test_without_log_probabilities_the_rule_fitted_without_the_models_odds_decides(scripted, scripted_llm):
    scripted_llm.queue(f"{VEGAS} reaches 1.25×–2.81× the decoding throughput of default vLLM [1].")
    answer = scripted.ask(f"What speedup over default vLLM does {VEGAS} report?")
    assert answer.status == "answered" and "2.81" in answer.text
    assert len(scripted_llm.judged) == 1, "asked once, then not again"


def test_where_the_rule_finds_no_answer_a_sentence_judged_to_answer_is_not_quoted_as_the_closest(scripted, scripted_llm):
    judged: list[str] = []

    def first_sentence_answers(content: str) -> bool:
        judged.append(content.split('Sentence: "', 1)[1].split('"\n', 1)[0])
        return len(judged) == 1

    scripted_llm.first_tokens = judging_model(declines=True, sentence=first_sentence_answers)
    answer = scripted.ask(f"What batch size does {VEGAS} draft with?")
    assert answer.refused and answer.text.startswith(f"The {VEGAS} abstract [1] does not answer that question.")
    assert len(judged) == 2 and judged[0] not in answer.text and judged[1] in answer.text
    assert drafts(scripted_llm) == [], "the rule refused before any draft"


def test_a_question_asking_two_things_is_answered_from_the_closest_sentences_the_judge_finds_answer(scripted, scripted_llm):
    # The rule refuses before any draft, as for one asked detail above; but the word rules read one asked
    # detail, so for two joined questions the judge's finding decides.
    scripted_llm.first_tokens = judging_model(declines=True, sentence=lambda content: True)
    answer = scripted.ask(f"What batch size does {VEGAS} draft with, and which GPUs does it run on?")
    assert answer.status == "answered" and not answer.refused
    assert answer.text.startswith(f"The {VEGAS} abstract says:") and "does not" not in answer.text
    assert drafts(scripted_llm) == []


def test_a_question_asking_two_things_that_no_close_sentence_answers_is_a_near_miss(scripted, scripted_llm):
    scripted_llm.first_tokens = judging_model(declines=True, sentence=lambda content: False)
    answer = scripted.ask(f"What batch size does {VEGAS} draft with, and which GPUs does it run on?")
    assert answer.refused and answer.text.startswith(f"The {VEGAS} abstract [1] does not answer that question.")


def test_a_sentence_that_carries_the_asked_figure_answers_only_where_the_model_leans_to_it(scripted, scripted_llm):
    vague = f"{VEGAS} decodes faster than default vLLM [1]."  # no figure for "how much": the draft fails
    scripted_llm.first_tokens = judging_model(sentence=lambda content: "2.81" in content)
    scripted_llm.queue(vague)
    answer = scripted.ask(f"How much faster than default vLLM does {VEGAS} decode?")
    assert answer.status == "answered" and "2.81" in answer.text
    scripted_llm.first_tokens = judging_model(sentence=lambda content: False)
    scripted_llm.queue(vague)
    answer = scripted.ask(f"How much faster than default vLLM does {VEGAS} decode?")
    assert answer.refused and "2.81" not in answer.text
