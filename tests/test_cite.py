"""The citation verifier, on hand-written drafts against real abstracts (the tests' corpus) and the real embedder."""

from __future__ import annotations

import pytest

from assistant.cite import Source, has_number, numbers_in, sentence_pairs, split_answer, verify
from assistant.drafts import copied, explained
from support import ISA, UPIPE, VEGAS, corpus_papers

THRESHOLD = 0.55


@pytest.fixture(scope="module")
def papers():
    return corpus_papers()


@pytest.fixture(scope="module")
def sources(papers, embedder):
    """[1] ISA (sparse attention for video editing), [2] Vegas (long-context decoding)."""
    made = []
    for number, title in enumerate([ISA, VEGAS], start=1):
        raw, clean = sentence_pairs(papers[title])
        made.append(Source(number, papers[title], raw, clean, embedder.encode(clean)))
    return made


@pytest.fixture(scope="module")
def check(sources, embedder):
    known = " ".join(s.paper.text for s in sources)
    return lambda draft: verify(draft, sources, embedder.encode, THRESHOLD, known)


def test_a_correct_citation_is_kept_with_a_verbatim_quote(check, papers):
    result = check(f"{VEGAS} improves decoding throughput by 1.25× to 2.81× over default vLLM [2].")
    assert [c.marker for c in result.citations] == [2]
    citation = result.citations[0]
    assert citation.paper.title == VEGAS
    assert citation.quote in papers[VEGAS].abstract
    assert "2.81" in citation.quote
    assert result.flagged == [] and result.text.count("1.25") == 1


def test_a_citation_carries_the_strength_of_its_support(check):
    close = check(f"{VEGAS} improves decoding throughput by 1.25× to 2.81× over default vLLM [2].").citations[0]
    loose = check(f"{VEGAS} is a method that makes decoding faster [2].").citations[0]
    assert close.support >= THRESHOLD
    assert close.support > loose.support > 0


def test_a_citation_to_the_wrong_paper_is_moved_to_the_supporting_one(check):
    result = check(f"{VEGAS} improves decoding throughput by 1.25× to 2.81× over default vLLM [1].")
    assert [(c.marker, c.paper.title) for c in result.citations] == [(2, VEGAS)]
    assert "[2]" in result.text and "[1]" not in result.text


def test_an_out_of_range_marker_is_dropped_and_the_claim_attributed(check):
    result = check(f"{ISA} applies sparse attention to in-context video editing [7].")
    assert "[7]" not in result.text
    assert [c.paper.title for c in result.citations] == [ISA]


def test_a_number_in_no_abstract_is_flagged_and_removed(check):
    result = check(f"{VEGAS} reaches an acceptance rate of 97.3% [2].")
    assert result.citations == []
    assert "97.3" not in result.text
    assert any("97.3" in flag for flag in result.flagged)


def test_a_number_from_another_paper_is_not_credited_to_the_cited_one(check):
    # 2.81 is Vegas's figure: a sentence about ISA quoting it cannot cite ISA.
    result = check(f"{ISA} reaches a 2.81× speedup on video editing [1].")
    assert all(c.paper.title != ISA for c in result.citations)


def test_an_unsupported_sentence_is_never_presented_as_cited(check):
    result = check("The method was developed at a large hospital in Berlin [1].")
    assert result.citations == []
    assert "[1]" not in result.text
    assert result.flagged


def test_a_sentence_without_a_marker_gets_one_when_a_source_supports_it(check):
    result = check(f"{VEGAS} targets the memory demands of the KV cache in long-context inference.")
    assert [c.marker for c in result.citations] == [2]


def test_a_bare_marker_is_not_an_answer(check):
    result = check("[1]")
    assert result.text == "" and result.citations == []


def test_markers_after_the_full_stop_belong_to_the_sentence_before():
    assert split_answer("First claim. [1] Second claim [2].") == ["First claim [1].", "Second claim [2]."]


def test_number_matching_respects_number_boundaries():
    assert has_number("a 1.25×–2.81× speedup", "2.81")
    assert not has_number("reaches 12.81 points", "2.81")
    assert not has_number("reaches 2.815 points", "2.81")
    assert numbers_in("from 1.25× to 2.81×, on 5M tokens and 80% of 3 sets") == {"1.25", "2.81", "5", "80"}


def test_each_cited_paper_appears_once_in_the_citations(check):
    result = check(f"{ISA} cuts attention cost for in-context video editing [1]. {ISA} uses sparse attention [1].")
    assert [c.marker for c in result.citations] == [1]


def test_a_draft_of_bare_markers_names_the_cited_papers_when_they_fit_the_question(sources, embedder):
    query = embedder.encode(["Which papers reduce the cost of attention in long-context or video models?"])[0]
    known = " ".join(s.paper.text for s in sources)
    result = verify("[1] and [2].", sources, embedder.encode, THRESHOLD, known, query_vector=query)
    assert [c.marker for c in result.citations] == [1, 2]
    assert f"{ISA} [1]" in result.text and f"{VEGAS} [2]" in result.text


def test_a_number_inside_chinese_text_is_still_checked(check):
    result = check("它把解码吞吐量提高了97.3倍[2]。")
    assert result.citations == [] and any("97.3" in flag for flag in result.flagged)
    assert numbers_in("它能节省50%以上的标注") == {"50"}


def test_a_chinese_sentence_with_the_papers_number_and_marker_is_cited(check):
    result = check(f"{VEGAS} 的解码吞吐量比 vLLM 高 1.25× 到 2.81× [2]。")
    assert [c.paper.title for c in result.citations] == [VEGAS]


def test_a_short_answer_copied_from_one_sentence_is_taken_as_the_abstracts_own(papers):
    _, clean = sentence_pairs(papers[UPIPE])
    assert copied("up to 5M tokens for training 8B models", clean)


def test_words_gathered_from_several_sentences_are_a_new_claim_to_judge(papers):
    _, clean = sentence_pairs(papers[UPIPE])
    statement = f"{UPIPE} reaches a training throughput of 25%."
    assert all(w in papers[UPIPE].text.lower() for w in ("upipe", "training", "throughput", "25%"))
    assert not copied(statement, clean)


def test_the_claim_a_draft_gives_a_reason_for_is_a_claim_of_its_own() -> None:
    statement = "The pruned model loses accuracy on the large benchmark because it drops more weights. It is fast."
    assert explained(statement) == ["The pruned model loses accuracy on the large benchmark"]
    assert explained("UPipe is slower, since chunking adds passes.") == ["UPipe is slower"]
    assert explained("Vegas 的解码速度比 vLLM 慢，因为草稿需要额外计算。") == ["Vegas 的解码速度比 vLLM 慢"]
    assert explained("UPipe trains 8B models on one node.") == []
    assert explained("Context parallelism has been studied since 2019 by many groups.") == []
