"""The Python functions that answer the letter_cat decomposer's sub-questions."""
import pytest

from decomp.programs.decomp.letters import concatenate, letter, words


def test_words_letter_and_concatenate_read_their_sub_questions():
    assert words('What are the words in "Augusta Ada King"?') == ["Augusta", "Ada", "King"]
    assert letter('What is the last letter of "Augusta"?') == "a"
    assert letter('What is the letter at position 3 of "Nascimento"?') == "s"
    assert concatenate('Concatenate ["a", "a", "g"] using a space.', [["a", "a", "g"]]) == "a a g"
    assert concatenate('Concatenate ["a", "b"] using a semi-colon.', [["a", "b"]]) == "a;b"
    assert concatenate('Concatenate ["a", "b"].', [["a", "b"]]) == "ab"


def test_a_sub_question_they_cannot_read_fails_plainly():
    with pytest.raises(ValueError, match="no quoted text"):
        words("What are the words?")
    with pytest.raises(ValueError, match="has no letter at position 9"):
        letter('What is the letter at position 9 of "Ada"?')
