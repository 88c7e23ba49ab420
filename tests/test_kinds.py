"""The question-kind classifier: its fitted files load, and its figures on held-out questions hold."""

from __future__ import annotations

import json

from assistant.kinds import DATA, KINDS, KindReader


def test_the_fitted_classifier_reads_every_kind_with_probabilities_that_sum_to_one(embedder) -> None:
    reader = KindReader(embedder.encode)
    assert set(reader.classes) == set(KINDS)
    reading = reader.read("how do I install CUDA drivers on my laptop?")
    assert reading.kind == "out_of_scope" and abs(sum(reading.probabilities.values()) - 1) < 1e-3


def test_the_classifier_was_checked_on_questions_it_was_not_fitted_on() -> None:
    figures = json.loads((DATA / "kinds.json").read_text())
    assert figures["heldout"]["accuracy"] >= 0.85 and figures["heldout"]["n"] >= 60
