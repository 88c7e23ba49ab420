"""The local embedder (real model, no network): what a question's vector and a stored chunk's share."""

from __future__ import annotations

import numpy as np

from assistant.embed import MINILM_DIM, MiniLMEmbedding


def test_texts_embed_as_unit_vectors_of_the_model_dimension(embedder: MiniLMEmbedding) -> None:
    vectors = embedder.encode(["Federated learning across many clients.", "A recipe for bread."])
    assert vectors.shape == (2, MINILM_DIM)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_a_text_embeds_the_same_alone_as_in_a_run_with_longer_texts(embedder: MiniLMEmbedding) -> None:
    # A question is embedded alone, a chunk in runs of several padded to the longest: both must land on
    # the same vector for the same text, or the dense search would rank by the company a chunk was indexed in.
    text = "In federated learning, clients train a shared model without sending their data to the server."
    alone = embedder.encode([text])[0]
    beside = embedder.encode(["A recipe.", text] + ["We render a 3D scene from one photograph, a long sentence " * 12] * 6)
    assert float(alone @ beside[1]) > 0.99999
    assert float(alone @ beside[0]) < 0.5
