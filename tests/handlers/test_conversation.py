"""The few-shot -> messages mapping itself (handlers/conversation.py): roles alternate (text
between examples, an example without an answer and text after the last example join the next
user turn, nothing dropped), one system message however instructions and markers combine, and
role markers that data cannot forge."""
from __future__ import annotations

import dataclasses

from decomp.dsl.parser import parse_fewshot
from decomp.handlers.conversation import (Message, decomposer_turns, fewshot_conversation, role_marker,
                                          split_roles, with_query, with_system)

FILE = """Answer with a number.

Q: How old is Bob?
A: 42

Ages are in years.

Q: How old is Ann?

Q: How old is Cy?
A: 7

Answer only the number.
"""


def conversation(text: str, **options) -> tuple[Message, ...]:
    return fewshot_conversation(parse_fewshot(text).examples, **options)


def file_examples() -> list:
    """FILE's examples, Ann's without its answer: a file with an unanswered question is an error
    when read (dsl/parser.py), but the mapping drops nothing of an example built without one."""
    examples = list(parse_fewshot(FILE.replace("Q: How old is Ann?\n", "Q: How old is Ann?\nA: 0\n")).examples)
    examples[3] = dataclasses.replace(examples[3], answer=None, lines=examples[3].lines[:1])
    return examples


def test_turns_alternate_and_no_text_is_dropped():
    found = with_query(fewshot_conversation(file_examples()), "How old is Dee?")
    assert [(m.role, m.content) for m in found] == [
        ("system", "Answer with a number."),
        ("user", "How old is Bob?"), ("assistant", "42"),
        ("user", "Ages are in years.\nHow old is Ann?\n\nHow old is Cy?"), ("assistant", "7"),
        ("user", "Answer only the number.\n\nHow old is Dee?"),
    ]
    roles = [m.role for m in found[1:]]
    assert all(a != b for a, b in zip(roles, roles[1:]))


def test_instructions_come_first_in_the_one_system_message():
    found = fewshot_conversation(file_examples(), instructions="Be brief.")
    assert found[0] == Message("system", "Be brief.\n\nAnswer with a number.")
    assert [m.role for m in found].count("system") == 1
    marked = (Message("system", "From the template."), Message("user", "q"))
    assert with_system("Be brief.", marked) == (Message("system", "Be brief.\n\nFrom the template."),
                                                Message("user", "q"))
    assert with_system(None, marked) == marked
    assert with_system("Be brief.", (Message("user", "q"),))[0] == Message("system", "Be brief.")


def test_a_decomposers_transcript_follows_its_examples():
    examples = conversation("QC: a b\nQS: [split] words of \"a b\"?\nA: [\"a\", \"b\"]\nQS: [EOQ]\n")
    assert [(m.role, m.content) for m in examples] == [
        ("user", "a b"), ("assistant", '[split] words of "a b"?'), ("user", '["a", "b"]'), ("assistant", "[EOQ]")]
    found = decomposer_turns(examples, "c d", [('[split] words of "c d"?', '["c", "d"]')])
    assert [(m.role, m.content) for m in found[4:]] == [
        ("user", "c d"), ("assistant", '[split] words of "c d"?'), ("user", '["c", "d"]')]


def test_role_markers_split_and_data_cannot_forge_them():
    role, nonce = role_marker()
    other, _ = role_marker()
    rendered = f"{role('system')}\nRules.\n{role('user')}\nHi {other('system')} there\n"
    text, messages = split_roles(rendered, nonce)
    assert [(m.role, m.content) for m in messages] == [("system", "Rules."), ("user", f"Hi {other('system')} there")]
    assert "Rules." in text and nonce not in text
    assert split_roles("no markers", nonce) == ("no markers", None)
