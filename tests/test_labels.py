"""Labels: the model names each paper once, the name is checked against the abstract, kept beside the
index and shown in place of the derived title; what does not hold is never shown."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assistant import Assistant
from assistant.labels import FILE_NAME, check
from support import SDG_NAME, VEGAS, scripted_settings
from fakes import ScriptedLLM

SDG_TEXT = ("Training-free diffusion guidance offers a flexible framework. We propose Stein Diffusion Guidance "
            "(SDG), which corrects the guidance with a Stein operator. SDG improves sampling on molecules.")


def test_a_name_and_its_expansion_make_the_label() -> None:
    assert check("SDG", "Stein Diffusion Guidance", SDG_TEXT).label == "SDG: Stein Diffusion Guidance"


def test_a_name_the_abstract_never_writes_is_dropped_and_the_description_kept() -> None:
    verdict = check("SteinGuide", "Stein Diffusion Guidance", SDG_TEXT)
    assert verdict.label == "Stein Diffusion Guidance" and "SteinGuide" in verdict.rejected[0]


@pytest.mark.parametrize("description, problem", [
    ("We propose a flexible framework for guidance.", "sentence"),
    ("training-free guidance for", "cut off"),
    ("protein folding with quantum annealers", "does not"),
    ("guidance", "words"),
])
def test_a_description_that_is_a_sentence_cut_off_or_not_from_the_abstract_is_rejected(description: str, problem: str) -> None:
    verdict = check("", description, SDG_TEXT)
    assert verdict.label == "" and problem in verdict.rejected[0]


def sdg(assistant: Assistant):
    return next(p for p in assistant.papers if SDG_NAME in p.text)


def test_a_label_the_model_writes_is_kept_by_abstract_and_shown_in_place_of_the_derived_title(
    own_index: Path, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.queue(json.dumps({"name": "SDG", "description": "Stein Diffusion Guidance"}))
    settings = scripted_settings(own_index, scripted_llm)
    with Assistant.from_settings(settings) as assistant:
        paper = sdg(assistant)
        derived = paper.title
        (kept,) = list(assistant.keep_papers([paper.id]))
        assert kept.shown == "SDG: Stein Diffusion Guidance" and kept.title == derived, "shown at once; prompts unchanged"
    assert "response_format" in scripted_llm.requests[-1], "asked for JSON"
    book = json.loads((own_index / FILE_NAME).read_text(encoding="utf-8"))
    assert [e["label"] for e in book.values()] == ["SDG: Stein Diffusion Guidance"]
    with Assistant.from_settings(settings) as reopened:  # a later start shows it, asks nothing again
        paper = sdg(reopened)
        assert paper.shown == "SDG: Stein Diffusion Guidance" and paper.called == "SDG"
        assert list(reopened.keep_papers([paper.id])) and len(scripted_llm.requests) == 1
        assert any(p["title"] == "SDG: Stein Diffusion Guidance" for p in [q.to_json() for q in reopened.papers])


def test_a_label_that_does_not_hold_is_never_shown_and_not_asked_again(own_index: Path, scripted_llm: ScriptedLLM) -> None:
    scripted_llm.queue(json.dumps({"name": "Diffusion", "description": "We propose a flexible framework for"}))  # a word, a sentence
    settings = scripted_settings(own_index, scripted_llm)
    with Assistant.from_settings(settings) as assistant:
        paper = sdg(assistant)
        (kept,) = list(assistant.keep_papers([paper.id]))
        assert kept.shown == paper.title and kept.display == ""
        list(assistant.keep_papers([paper.id]))
    assert len(scripted_llm.requests) == 1
    (entry,) = json.loads((own_index / FILE_NAME).read_text(encoding="utf-8")).values()
    assert entry["label"] == "" and entry["rejected"]


def test_an_ordinary_word_of_the_abstract_is_not_a_name() -> None:
    verdict = check("Diffusion", "", SDG_TEXT.replace("Training-free diffusion", "Training-free Diffusion") + " diffusion models")
    assert verdict.label == "" and "ordinary word" in verdict.rejected[0]


def test_a_description_without_a_name_is_led_by_the_name_the_rule_found(own_index: Path, scripted_llm: ScriptedLLM) -> None:
    scripted_llm.queue(json.dumps({"name": "", "description": "Verification-guided sparse attention drafting"}))
    settings = scripted_settings(own_index, scripted_llm)
    with Assistant.from_settings(settings) as assistant:
        (kept,) = list(assistant.keep_papers([VEGAS]))
    assert kept.shown == f"{VEGAS}: Verification-guided sparse attention drafting" and kept.called == VEGAS


def test_a_name_that_spells_out_the_short_name_the_rule_found_is_led_by_it() -> None:
    from assistant.labels import expands

    assert expands("Synchronized Successive Rejects", "SySRs") and expands("Attention with Routed Memory", "ARM")
    assert not expands("Adaptive MoE upcycling", "Gumbel-Softmax") and not expands("Federated Continual Learning", "RC-FCL")
