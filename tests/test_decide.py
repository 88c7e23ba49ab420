"""The decision stage: what a question asks for, near misses, topic lists, fall-backs and quotes.

Below the LLM: the real index of the tests' corpus and the real embedder, and where a model reply is needed the scripted
OpenAI-compatible server (the model is a network service), so each case pins one decision.
"""

from __future__ import annotations

import json
import re

import pytest

from assistant import Answer
from assistant.prompting import AnswerField
from assistant.followups import conversation_query, refers_back
from assistant.intent import asks_two, read_question
from assistant.slots import adds_nothing, asked_for, states
from assistant.topic_choice import Likeness, TopicMember, topic_parts
from assistant.types import Passage
from assistant.wording import question_names, sanitize, unknown_specifics

from support import ARM, ECHO_ATTENTION, FEDERATED, ISA, VEGAS
from fakes import Fault, judging_model

# -- what the question asks for --------------------------------------------------------------


@pytest.mark.parametrize(
    "question, kind, slot",
    [
        ("Which paper teaches a model to route tokens to memory slots?", "which_paper", "paper"),
        ("is there a paper on pruning context tokens for video editing", "which_paper", "paper"),
        ("Which papers are about sparse attention?", "topic", "papers"),
        ("any papers on bandits?", "topic", "papers"),
        ("What is the difference between ARM and Vegas in what they keep?", "comparison", "mechanism"),
        ("How many slots does the routed memory have?", "fact", "count"),
        ("By how much does EchoAttention cut latency?", "fact", "number"),
        ("Which datasets is ISA evaluated on?", "fact", "dataset"),
        ("Compared with what is the speedup of Vegas measured?", "fact", "baseline"),
        ("Does Vegas need a separate draft model?", "fact", "yes_no"),
        ("How does ARM decide which memory slots to update?", "fact", "mechanism"),
        # a "how many" inside a description is part of the paper's description, not the question
        ("a scheduler whose guarantee depends on how many requests show up - which paper?", "which_paper", "paper"),
        ("a memory that blends tokens into a fixed number of slots - whats that paper", "fact", "other"),
        ("How does it choose the amount of memory it uses?", "fact", "mechanism"),
        ("And on how many datasets was it measured?", "fact", "count"),
        ("Theoretically, does quantised low-bit training lower a model's effective capacity?", "fact", "yes_no"),
        ("What correlation coefficient did the two graders reach?", "fact", "number"),
        ("Which agreement coefficient do the two graders reach?", "fact", "number"),
        ("By what factor does ARM shrink the KV cache?", "fact", "number"),
        # a detail of one paper, although phrased like a list
        ("Which methods does it compare against?", "fact", "baseline"),
        ("Is there work on proving inequalities with LLMs? How many variables does it handle?", "fact", "count"),
    ],
)
def test_the_kind_and_asked_slot_of_a_question(question: str, kind: str, slot: str) -> None:
    intent = read_question(question)
    assert (intent.kind, intent.slot) == (kind, slot)


@pytest.mark.parametrize(
    "question, two",
    [
        ("Which optimizer did they train with, and what learning rate did they pick?", True),
        ("What speedup does it report on long prompts and under what batch size?", True),
        ("How many layers and how many heads does the model have?", True),
        ("What regret bound does Way-SE achieve for one-sided learning?", False),
        ("Which papers study pruning and quantization?", False),
        ("How do ARM and Vegas differ?", False),
    ],
)
def test_a_question_that_joins_a_second_question_to_the_first_is_told(question: str, two: bool) -> None:
    assert asks_two(question) is two


@pytest.mark.parametrize(
    "question, topic",
    [
        ("what in this collection is about quantum error correction?", "quantum error correction"),
        ("anything on speech recognition?", "speech recognition"),
        ("graph neural networks - anything in here on that?", "graph neural networks"),
        ("I need work on protein folding. Anything here?", "I need work on protein folding"),
        ("protein folding papers?", "protein folding"),
        ("Which papers use or extend low-rank adapters?", "low-rank adapters"),
    ],
)
def test_a_topic_question_is_read_in_the_ways_users_ask_it(question: str, topic: str) -> None:
    intent = read_question(question)
    assert (intent.kind, intent.topic) == ("topic", topic)


@pytest.mark.parametrize(
    "topic, parts",
    [
        ("speech recognition", []),
        ("speech recognition or speaker diarization", ["speech recognition", "speaker diarization"]),
        ("code generation / program synthesis", ["code generation", "program synthesis"]),
        ("efficient attention, e.g. linear attention or state space models",
         ["linear attention", "state space models"]),
        ("privacy attacks (membership inference, model inversion, etc.)", ["membership inference", "model inversion"]),
        ("bandits or online learning", ["online learning"]),  # one word alone is not taken as an alternative
        ("graph neural networks and molecular property prediction", ["graph neural networks", "molecular property prediction"]),
    ],
)
def test_a_topic_is_read_as_each_alternative_and_example_it_names(topic: str, parts: list[str]) -> None:
    assert topic_parts(topic) == [topic, *parts]


def test_asking_whether_one_abstract_says_anything_is_not_a_topic_question() -> None:
    assert read_question("Does the Vegas abstract say anything about its batch size?").kind == "fact"


def test_a_chinese_which_paper_question_stays_one_when_its_english_rewrite_is_a_bare_phrase() -> None:
    intent = read_question("Sparse attention in video editing research", original="哪篇论文研究了视频编辑中的稀疏注意力？")
    assert (intent.kind, intent.slot) == ("which_paper", "paper")
    assert read_question("Speedup of sparse attention in video editing", original="稀疏注意力带来多少加速？").kind == "fact"


def test_the_focus_is_what_the_question_asks_for_in_its_own_words() -> None:
    assert read_question("What batch size does Vegas draft with?").focus == "batch size"
    assert read_question("How many GPUs did they train ARM on?").focus == "GPUs"
    assert read_question("how much faster is the video model").focus == "faster"
    assert read_question("How large a speedup does the video model get?").focus == "speedup"  # the noun, not "large"
    assert read_question("Which papers are about routing tokens to experts?").topic == "routing tokens to experts"
    assert read_question("Which papers involve in-context learning?").topic == "in-context learning"  # not "volve …"
    # A second question after the topic is asked of the listed papers; it is not what they are about.
    assert read_question("Which papers use conformal methods, and for what?").topic == "conformal methods"
    assert read_question("Which papers use mixture-of-experts, and how do they differ?").topic == "mixture-of-experts"
    assert read_question("What are the three components it combines?").focus == "components"  # a count qualifies
    assert read_question("What kinds of visual prompts did they try?").focus == "visual prompts"
    assert read_question("how much can the method reduce latency?").focus == "reduce latency"  # the verb and its object



@pytest.mark.parametrize(
    "question, said",
    [
        ("What batch size does Vegas draft with?", "give the batch size"),
        ("How many GPUs did they train ARM on?", "give the number of GPUs"),
        ("how much faster is the video model", "say how much faster"),
        ("What failure modes was it designed to fix?", "give the failure modes"),
        # The verb of change and the word after it are not a thing the abstract could give.
        ("How much does it beat other sparse-attention decoding methods by?", "give that figure"),
        ("how much can the method reduce peak memory?", "give that figure"),
        # A comparison's focus is the words its frame left over.
        ("What's the difference between ARM and Vegas?", "answer that question"),
    ],
)
def test_what_an_abstract_does_not_give_is_said_in_words_that_read_as_english(question: str, said: str) -> None:
    assert asked_for(read_question(question)) == said


def test_a_count_answers_how_many_only_when_it_counts_the_asked_thing() -> None:
    intent = read_question("How many annotated images does the benchmark hold?")
    assert states(intent, "The benchmark holds 12,000 annotated images [1].")
    assert states(intent, "It has two splits and forty thousand annotated images.")
    assert not states(intent, "The benchmark has three parts: a pool of annotated images, labels and a leaderboard.")


# -- follow-ups ---------------------------------------------------------------------------------

VEGAS_TURN = [
    {"role": "user", "content": "Which paper reuses verification to pick KV entries?"},
    {"role": "assistant", "content": "That is Vegas, a self-speculative decoding method [1]."},
]


@pytest.mark.parametrize(
    "question",
    ["How did they evaluate it?", "What failure modes was that method designed to fix?", "When do those neurons form?",
     "How did they test the approach on real data?", "And the speedup?", "Is there a GitHub link for it?"],
)
def test_a_follow_up_that_leans_on_the_conversation_is_searched_with_it(question: str) -> None:
    assert refers_back(question)
    query = conversation_query(question, VEGAS_TURN)
    assert query.startswith(question) and VEGAS_TURN[0]["content"] in query and "Vegas" in query


@pytest.mark.parametrize(
    "question",
    ["New question: which paper compresses random forests, and by how much does it shrink them?",
     "Something else: is there a solver for weather forecasts? What data does it train on?",
     "Next: what does PINE stand for?",
     "Now, in the paper on causal discovery from count data, what tool characterizes the dependencies?"],
)
def test_a_follow_up_with_its_own_subject_is_searched_as_typed(question: str) -> None:
    assert not refers_back(question)
    assert conversation_query(question, VEGAS_TURN) == question


def test_question_words_and_sentence_starts_are_never_names() -> None:
    assert question_names("Tell me about Vegas. What speedup does it reach? Does it beat SGLang?") == ["Vegas", "SGLang"]
    assert question_names("Which one uses a Gumbel-Softmax?") == ["Gumbel-Softmax"]


def test_html_and_terminal_colour_codes_are_not_part_of_the_question() -> None:
    assert sanitize("<b>What</b> speedup does \x1b[31mVegas\x1b[0m reach?") == "What speedup does Vegas reach?"
    assert sanitize("[31mVegas[0m speedup?") == "Vegas speedup?"


def test_generic_capitalised_words_are_required_only_of_a_named_paper() -> None:
    text = ["We train a routed memory for long-context inference."]
    assert unknown_specifics("My GPUs run out of memory, any fix?", text, strict=False) == []
    assert unknown_specifics("How many GPUs did they use?", text) == ["GPUs"]
    assert unknown_specifics("Does SCM-GRPO beat it?", ["An SCM-inspired framework trained with GRPO."]) == []


def test_an_answer_that_only_restates_the_question_adds_nothing() -> None:
    question = "Which LLM judges does the Item Response Theory study look at?"
    assert adds_nothing("The Item Response Theory study looks at LLM judges [1].", question)
    assert adds_nothing("Source looks at LLM judges [1].", question), "a placeholder for the paper is no content"
    assert adds_nothing("LLM judges in the Item Response Theory study are described in source [1].", question)
    assert not adds_nothing("The study analysed GPT-4o, Claude and five other judges [1].", question)
    assert not adds_nothing("It reaches 2.81× [1].", "What speedup does it reach?"), "a new figure is content"
    # A Chinese answer's content is in its characters, not in the Latin names it shares with the question.
    chinese = "Vegas 用什么方法挑选关键的 KV 条目？"
    assert not adds_nothing("Vegas 通过验证过程识别关键的 KV 条目 [1]。", chinese)
    assert adds_nothing("Vegas 挑选关键的 KV 条目 [1]。", chinese)


def test_the_answer_field_streams_out_of_json_as_it_is_generated() -> None:
    field = AnswerField()
    pieces = ['{"evidence": ["1.2"], "ans', 'wer": "Vegas is \\"fa', 'st\\" [1]', '."}']
    assert "".join(field.feed(p) for p in pieces) == 'Vegas is "fast" [1].'
    assert field.done


# -- decisions made before the model ----------------------------------------------------------

VIDEO_TOPIC = "Are there any papers about sparse attention for video?"  # the rule alone lists ISA and EchoAttention


def test_a_detail_the_named_papers_abstract_never_gives_is_a_near_miss_without_a_draft(scripted, scripted_llm):
    answer = scripted.ask(f"What batch size does {VEGAS} draft with?")
    assert answer.refused and answer.status == "not_in_abstracts"
    assert answer.text.startswith(f"The {VEGAS} abstract [1] does not answer that question.")
    assert [c.paper.title for c in answer.citations] == [VEGAS], "what the abstract does say is cited"
    assert any("does not give the batch size" in notice for notice in answer.notices), "what the word rules found"
    assert scripted_llm.requests == []


def test_a_name_the_papers_abstract_never_mentions_is_a_near_miss(scripted, scripted_llm):
    answer = scripted.ask(f"Tell me about {VEGAS}. How does it compare with SGLang?")
    assert answer.refused and VEGAS in answer.text
    assert any("does not mention SGLang" in notice for notice in answer.notices), (answer.notices, answer.text, answer.status)
    assert scripted_llm.requests == []


def test_a_which_paper_question_about_something_no_abstract_says_is_refused_when_the_model_declines(scripted, scripted_llm):
    scripted_llm.queue("NOT_IN_SOURCES")
    answer = scripted.ask("Which paper condenses lengthy court rulings into short summaries?")
    assert answer.refused and answer.status == "not_in_abstracts" and answer.citations == []
    assert any("does not speak to any part of the question" in notice for notice in answer.notices)


def test_a_which_paper_question_in_everyday_words_still_reaches_the_model(scripted, scripted_llm):
    scripted_llm.queue(f"{VEGAS} drafts tokens with a subset of its own KV cache [1].")
    answer = scripted.ask("which paper makes LLM decoding faster by drafting tokens from its own cache and verifying them?")
    assert len(scripted_llm.requests) == 1 and answer.status == "answered"


def test_a_chinese_which_paper_question_the_model_declines_names_the_paper_in_a_chinese_frame(scripted, scripted_llm):
    scripted_llm.first_tokens = judging_model(sentence=lambda content: True)  # the judge: it answers
    scripted_llm.queue("Which paper studies sparse attention in video editing?", "NOT_IN_SOURCES")
    answer = scripted.ask("哪篇论文研究了视频编辑中的稀疏注意力？")
    assert answer.status == "answered" and answer.intent == "which_paper"
    title = answer.citations[0].paper.title
    assert answer.text.startswith(f"可能是 {title} [1]。“") and "video editing" in answer.citations[0].quote.lower()


def test_a_topic_question_lists_every_paper_on_it_each_with_its_sentence(scripted, scripted_llm):
    answer = scripted.ask(VIDEO_TOPIC)
    titles = [c.paper.title for c in answer.citations]
    assert answer.intent == "topic" and answer.status == "answered"
    assert {ISA, ECHO_ATTENTION} <= set(titles)
    for citation in answer.citations:
        assert f"{citation.paper.title} [{citation.marker}]" in answer.text
        assert all(citation.paper.abstract[s.start: s.end] == s.text for s in citation.spans)
    # This backend gives no log-probabilities: asked once, it leaves the rule to choose; nothing is written.
    assert len(scripted_llm.judged) == 1 and scripted_llm.requests == []


def test_a_topic_reply_states_the_topic_in_the_questions_own_words(scripted, scripted_llm):
    answer = scripted.ask(VIDEO_TOPIC)
    assert answer.text.startswith(f"{len(answer.citations)} papers in the collection match “sparse attention for video”:")


def test_a_topic_reply_to_a_chinese_question_states_the_topic_in_its_words(scripted, scripted_llm):
    scripted_llm.queue(VIDEO_TOPIC, "视频生成里的 sparse attention")  # the English rewrite, then the topic as the user put it
    answer = scripted.ask("有没有讲视频生成里的 sparse attention 的论文？")
    assert answer.intent == "topic" and {ISA, ECHO_ATTENTION} <= {c.paper.title for c in answer.citations}
    assert answer.text.startswith(f"本论文集中有 {len(answer.citations)} 篇论文关于“视频生成里的 sparse attention”：")


def test_a_chinese_topic_phrase_not_in_the_questions_words_gives_way_to_the_question(scripted, scripted_llm):
    scripted_llm.queue(VIDEO_TOPIC, "图神经网络的过平滑")  # not what the user asked: a phrase of the model's own
    answer = scripted.ask("有没有讲视频生成里的 sparse attention 的论文？")
    assert answer.text.startswith(f"本论文集中有 {len(answer.citations)} 篇论文关于“有没有讲视频生成里的 sparse attention 的论文”：")


def test_a_model_that_fails_to_state_a_chinese_topic_leaves_the_list_with_the_question_quoted(scripted, scripted_llm):
    scripted_llm.queue(VIDEO_TOPIC, Fault.http(500, "out of memory"))
    answer = scripted.ask("有没有讲视频生成里的 sparse attention 的论文？")
    assert {ISA, ECHO_ATTENTION} <= {c.paper.title for c in answer.citations}
    assert answer.text.startswith(f"本论文集中有 {len(answer.citations)} 篇论文关于“有没有讲视频生成里的 sparse attention 的论文”：")
    assert any("could not state the topic in Chinese" in notice for notice in answer.notices)


@pytest.mark.settings(related_threshold=0.001)  # the papers just below the first tier are listed whatever the fit
def test_a_topic_list_shows_possibly_related_papers_apart_and_does_not_cite_them(scripted, scripted_llm):
    answer = scripted.ask(VIDEO_TOPIC)
    cited = {c.paper.id for c in answer.citations}
    assert answer.related and not cited & {c.paper.id for c in answer.related}
    assert "Possibly related: " + "; ".join(c.paper.title for c in answer.related) in answer.text
    assert all(c.quote in c.paper.abstract or c.spans for c in answer.related)


def test_possibly_related_papers_most_alike_in_words_to_the_listed_ones_come_first(small_assistant):
    # With FedUSD listed on "federated learning", the corpus's other federated learning paper is the
    # most alike of the rest, wherever the rule placed it (here: last).
    def member(title: str) -> TopicMember:
        paper = next(p for p in small_assistant.papers if p.title == title)
        return TopicMember(Passage(paper, paper.text, 0.0), None, 0.0)

    listed, other = FEDERATED
    rest = [member(p.title) for p in small_assistant.papers if p.title not in FEDERATED] + [member(other)]
    ordered = Likeness(small_assistant.papers).order(rest, [member(listed)], "federated learning")
    assert ordered[0].passage.paper.title == other and len(ordered) == len(rest)
    assert Likeness(small_assistant.papers).order(rest, [], "federated learning") == rest  # nothing listed: as given


def test_where_the_backend_gives_log_probabilities_the_models_odds_weigh_the_papers_the_rule_is_unsure_of(scripted, scripted_llm):
    scripted_llm.first_tokens = lambda messages: {"No": -0.05, "Yes": -3.0}  # the model says no to every paper
    answer = scripted.ask(VIDEO_TOPIC)
    listed = {c.paper.title for c in answer.citations}
    asked = [r for r in scripted_llm.judged if "Is this paper about" in r["messages"][-1]["content"]]
    asked_about = {p.title for p in scripted.papers if any(f"[1] {p.title}:" in r["messages"][-1]["content"] for r in asked)}
    assert asked and all("Is this paper about sparse attention for video?" in r["messages"][-1]["content"] for r in asked)
    assert not asked_about & listed  # a paper the rule was unsure of and the model says no to is not listed
    # ISA and EchoAttention say the topic plainly: the rule lists them without asking (`TOPIC_JUDGE_CEILING`).
    assert {ISA, ECHO_ATTENTION} <= listed and not {ISA, ECHO_ATTENTION} & asked_about


def test_a_model_that_fails_while_weighing_papers_leaves_the_rule_to_choose_and_says_so(scripted, scripted_llm):
    def fail(messages):
        raise RuntimeError("out of memory")

    scripted_llm.first_tokens = fail
    answer = scripted.ask(VIDEO_TOPIC)
    assert {ISA, ECHO_ATTENTION} <= {c.paper.title for c in answer.citations}
    assert any("could not weigh the papers" in notice for notice in answer.notices)
    assert len(scripted_llm.judged) == 1  # not asked again for this list


def test_a_topic_list_leaves_out_papers_that_are_only_near_the_topic(scripted, scripted_llm):
    answer = scripted.ask("anything on attention sparsity in video generators?")
    assert answer.intent == "topic"
    assert sorted(c.paper.title for c in answer.citations) == sorted([ECHO_ATTENTION, ISA])


# -- decisions made after the model -------------------------------------------------------------


def test_a_sentinel_fragment_after_an_answer_is_removed(scripted, scripted_llm):
    scripted_llm.queue(f"{VEGAS} reaches 1.25×–2.81× over default vLLM [1]. Not_IN_SOURCES")
    answer = scripted.ask(f"What speedup does {VEGAS} reach over vLLM?")
    assert answer.status == "answered" and "not_in_sources" not in answer.text.lower()
    assert "2.81" in answer.text


def test_when_the_model_declines_a_which_paper_question_the_evidence_answers_it(scripted, scripted_llm):
    scripted_llm.first_tokens = judging_model(sentence=lambda content: True)  # the judge: it answers
    scripted_llm.queue("NOT_IN_SOURCES")
    answer = scripted.ask("I remember a paper that drafts tokens from part of its own KV cache and checks them. Which one?")
    assert answer.status == "answered" and not answer.refused
    assert answer.citations[0].paper.title == VEGAS and VEGAS in answer.text
    assert any("model declined" in notice for notice in answer.notices)


def test_a_which_paper_question_the_model_declines_is_answered_by_the_paper_the_model_finds_it_is_about(scripted, scripted_llm):
    # No sentence is judged to answer "which one?": the paper read first is judged instead.
    scripted_llm.first_tokens = judging_model(about=lambda content: VEGAS in content)
    scripted_llm.queue("NOT_IN_SOURCES")
    answer = scripted.ask("I remember a paper that drafts tokens from part of its own KV cache and checks them. Which one?")
    assert answer.status == "answered" and answer.text.startswith(f"This looks like {VEGAS} [1]")
    assert any("Is this paper about" in r["messages"][-1]["content"] and VEGAS in r["messages"][-1]["content"]
               for r in scripted_llm.judged)


def test_the_model_is_asked_once_whether_a_paper_is_about_a_question(scripted, scripted_llm):
    # The reading that orders a question's first papers and the fallback of its failed draft ask the same.
    scripted_llm.first_tokens = judging_model(about=lambda content: True)
    (vegas,) = [p for p in scripted.by_id.values() if p.title == VEGAS]
    passage = Passage(paper=vegas, text=vegas.text, score=1.0)
    first = scripted.engine.topics.odds("drafting tokens from part of the KV cache", passage)
    again = scripted.engine.topics.odds("drafting tokens from part of the KV cache", passage)
    asked = [r for r in scripted_llm.judged if "Is this paper about" in r["messages"][-1]["content"]]
    assert first == again and first > 0 and len(asked) == 1


def test_a_which_paper_question_the_model_declines_stays_refused_when_the_model_finds_the_paper_is_not_about_it(scripted, scripted_llm):
    scripted_llm.first_tokens = judging_model(about=lambda content: False)
    scripted_llm.queue("NOT_IN_SOURCES")
    answer = scripted.ask("I remember a paper that drafts tokens from part of its own KV cache and checks them. Which one?")
    assert answer.refused and not answer.text.startswith("This looks like")


def test_a_count_answered_without_a_number_is_not_presented_as_an_answer(scripted, scripted_llm):
    scripted_llm.queue(f"{ARM} selects memory slots with a Gumbel-Softmax [1].")
    answer = scripted.ask(f"How many memory slots does {ARM} use?")
    assert answer.refused and answer.status == "not_in_abstracts"
    assert ARM in answer.text and "does not" in answer.text


def test_a_draft_that_restates_the_question_is_replaced_by_the_sentence_naming_the_paper(scripted, scripted_llm):
    scripted_llm.first_tokens = judging_model(sentence=lambda content: True)  # the judge: it answers
    scripted_llm.queue("Drafts tokens using a subset of the KV cache chosen during verification [1].")
    answer = scripted.ask("Which paper drafts tokens using a subset of the KV cache chosen during verification?")
    assert answer.status == "answered" and answer.text.startswith(f"This looks like {VEGAS} [1]: “")
    assert any("model declined" in notice for notice in answer.notices)


def test_a_which_paper_answer_names_the_paper_the_model_called_source(scripted, scripted_llm):
    scripted_llm.queue("Source drafts tokens from a subset of its own KV cache, chosen during verification [1].")
    answer = scripted.ask("Which paper speeds up decoding by drafting with part of the model's own cache?")
    assert answer.status == "answered" and answer.text.startswith(f"{VEGAS} drafts tokens")
    assert [c.paper.title for c in answer.citations] == [VEGAS]


def test_a_comparison_cites_both_papers_even_when_the_draft_cites_one(scripted, scripted_llm):
    scripted_llm.queue(f"{VEGAS} drafts with a subset of the KV cache chosen during verification [1].")
    answer = scripted.ask(f"What is the difference between {ARM} and {VEGAS} in their use of the KV cache?")
    assert answer.intent == "comparison"
    assert {VEGAS, ARM} <= {c.paper.title for c in answer.citations}


def test_a_comparison_whose_draft_fails_quotes_the_closest_sentence_of_each_paper(scripted, scripted_llm):
    scripted_llm.first_tokens = judging_model(claim_holds=False, says_otherwise=False)
    scripted_llm.queue(f"{ARM} keeps every entry of the KV cache, while {VEGAS} drops half of it [1].")
    answer = scripted.ask(f"What is the difference between {ARM} and {VEGAS} in their use of the KV cache?")
    assert answer.status == "answered" and not answer.refused
    assert {c.paper.title for c in answer.citations} == {ARM, VEGAS}
    for citation in answer.citations:
        assert f"The {citation.paper.called} abstract says: “" in answer.text
        plain = re.sub(r"[_*]", "", " ".join(citation.quote.split()))  # the quote keeps the abstract's markup
        assert plain in " ".join(answer.text.split())
    assert "drops half" not in answer.text, "the claim that did not hold is not shown"


def test_a_comparison_of_what_neither_abstract_mentions_is_not_answered_by_quoting_both(scripted, scripted_llm):
    scripted_llm.first_tokens = judging_model(claim_holds=False, says_otherwise=False)
    scripted_llm.queue(f"{ARM} runs on SGLang, while {VEGAS} runs on TensorRT-LLM [1].")
    answer = scripted.ask(f"How do {ARM} and {VEGAS} differ in how they run on SGLang and TensorRT-LLM?")
    assert answer.refused and "abstract says" not in answer.text


def test_a_comparison_reads_only_the_two_papers_it_compares(scripted, scripted_llm):
    scripted_llm.queue(f"{ISA} skips attention by its own rule [1], while {ECHO_ATTENTION} reuses similar frame blocks [2].")
    scripted.ask(f"Compare {ISA} and {ECHO_ATTENTION}: how does each decide which attention to skip?")
    prompt = scripted_llm.messages()[-1]["content"]
    assert "[1]" in prompt and "[2]" in prompt and "[3]" not in prompt


def test_quotes_are_contiguous_passages_and_separate_sentences_stay_apart(scripted, scripted_llm):
    scripted_llm.queue(f"{VEGAS} is a self-speculative decoding method [1]. Its code is public on GitHub [1].")
    answer = scripted.ask(f"What is {VEGAS} and is its code available?")
    (vegas,) = [c for c in answer.citations if c.paper.title == VEGAS]
    assert len(vegas.spans) == 2, "two sentences that are not adjacent are two passages"
    for span in vegas.spans:
        assert vegas.paper.abstract[span.start: span.end] == span.text
    assert vegas.quote == " … ".join(s.text for s in vegas.spans)


@pytest.mark.settings(answer_format="quote_first")
def test_quote_first_streams_the_answer_and_quotes_the_sentences_the_model_picked(scripted, scripted_llm):
    reply = {"evidence": ["1.8"], "answer": f"{VEGAS} reaches 1.25×–2.81× over default vLLM [1]."}
    scripted_llm.queue(json.dumps(reply, ensure_ascii=False))
    events = list(scripted.stream(f"What speedup does {VEGAS} reach over vLLM?"))
    tokens, final = events[:-1], events[-1]
    assert "".join(tokens) == reply["answer"], "the JSON around the answer is not shown"
    assert isinstance(final, Answer) and final.status == "answered"
    request = scripted_llm.requests[0]
    assert request["response_format"]["type"] == "json_schema"
    assert "1.8" in json.dumps(request["response_format"]), "the ids shown are the only ones allowed"
    (vegas,) = final.citations
    assert [(s.first, s.last) for s in vegas.spans] == [(7, 7)]


@pytest.mark.settings(answer_format="quote_first")
def test_quote_first_with_an_empty_answer_is_not_an_answer(scripted, scripted_llm):
    scripted_llm.queue(json.dumps({"evidence": ["1.2"], "answer": ""}))
    answer = scripted.ask(f"How does {VEGAS} choose its learning rate schedule?")
    assert answer.refused
