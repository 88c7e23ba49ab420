"""Topics of the collection: clusters of the stored paper vectors, labelled by their own terms."""

from __future__ import annotations

import numpy as np

from assistant.wording import STOPWORDS
from assistant.topics import GENERIC_TERMS, cluster, label_groups
from support import ARM, VEGAS


def test_every_paper_is_in_exactly_one_topic(small_assistant):
    groups = small_assistant.topic_groups()
    ids = [p.id for g in groups for p in g.papers]
    assert sorted(ids) == sorted(p.id for p in small_assistant.papers)
    assert len(groups) >= 3  # its subjects are told apart, not lumped into one or two groups


def test_topic_labels_are_distinctive_terms_not_common_words(small_assistant):
    for group in small_assistant.topic_groups():
        assert group.terms, group
        for term in group.terms:
            assert not set(term.split()) <= (STOPWORDS | GENERIC_TERMS), term
            # A label term is used by at least one of the group's own papers.
            assert any(term in p.text.lower() for p in group.papers), term


def test_papers_on_one_subject_land_in_one_topic(small_assistant):
    by_title = {p.title: g.label for g in small_assistant.topic_groups() for p in g.papers}
    assert by_title[VEGAS] == by_title[ARM]  # both are about the KV cache of long-context LLMs


def test_grouping_is_the_same_every_time(small_assistant):
    vectors = small_assistant.store.paper_vectors()
    from assistant.topics import paper_matrix

    _, matrix = paper_matrix(small_assistant.papers, vectors)
    assert (cluster(matrix) == cluster(matrix)).all()


def test_a_label_is_what_sets_a_group_apart():
    texts = ["kv cache eviction for llm inference", "kv cache compression speeds inference",
             "federated clients share synthetic data", "federated clients drift over time"]
    labels = label_groups(texts, np.array([0, 0, 1, 1]), n_terms=1)
    assert labels[0][0].startswith("kv") or labels[0][0] == "cache"
    assert labels[1] == ["federated clients"] or labels[1][0] in ("federated", "clients")
