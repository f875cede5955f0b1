"""`redact_url` and `url_secrets` (dsl/redact.py): credentials written into a URL (user-info, query
values) never reach what a run records or prints (issue 14, item 3)."""
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from decomp.dsl.redact import MIN_MASKED, SecretMask, redact_url, url_secrets


@pytest.mark.parametrize("url, shown", [
    ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
    ("https://api.example.com/v1/", "https://api.example.com/v1/"),
    ("https://user:pa55word@host:8000/v1", "https://***@host:8000/v1"),
    ("https://sk-abcdef123456@host/v1", "https://***@host/v1"),
    ("https://host/v1?api-key=s3cret&api-version=2024", "https://host/v1?api-key=***&api-version=***"),
    ("https://host/v1?sk-abcdef123456", "https://host/v1?***"),
    ("https://host/v1?key=", "https://host/v1?key="),
    ("https://u:p@host/v1?k=v#token=abc", "https://***@host/v1?k=***"),
    ("http://[::1", "<a URL that cannot be parsed>"),
    ("http://host:notaport/v1?key=s3cret", "<a URL that cannot be parsed>"),
])
def test_redact_url(url, shown):
    assert redact_url(url) == shown


def test_none_stays_none():
    assert redact_url(None) is None and url_secrets(None) == ()


def test_url_secrets_lists_what_is_hidden_as_written_and_decoded():
    secrets = url_secrets("https://me:p%40ss%2Fword@host/v1?api-key=s3cret-key&x=1")
    assert {"p%40ss%2Fword", "p@ss/word", "s3cret-key"} <= set(secrets)
    assert "1" not in secrets and "host" not in secrets  # short values and the host are not secrets


SECRET = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_", min_size=8, max_size=30)


@given(SECRET, SECRET)
def test_a_secret_in_user_info_or_query_never_survives(user_secret, query_secret):
    url = f"https://{user_secret}:{user_secret}@example.com/v1?key={query_secret}"
    shown = redact_url(url)
    assert user_secret not in shown and query_secret not in shown
    assert shown.startswith("https://***@example.com/v1")
    assert {user_secret, query_secret} <= set(url_secrets(url))


# ---- SecretMask: known secrets masked in free text (a model's reply), issue 29 B5
def test_a_secret_is_masked_with_what_it_was():
    mask = SecretMask({"sk-live-0123456789": "OPENAI_API_KEY"})
    assert mask("my key is sk-live-0123456789.") == "my key is [redacted: OPENAI_API_KEY]."
    assert mask("twice: sk-live-0123456789 sk-live-0123456789") == ("twice: [redacted: OPENAI_API_KEY] "
                                                                    "[redacted: OPENAI_API_KEY]")
    assert mask("nothing here") == "nothing here" and mask("") == ""


def test_overlapping_secrets_are_masked_longest_first_in_one_pass():
    mask = SecretMask({"pa55word-long": "password", "alice:pa55word-long": "user-info"})
    assert mask("alice:pa55word-long / pa55word-long") == "[redacted: user-info] / [redacted: password]"
    # a label is never masked again, even when it holds a secret's text
    assert SecretMask({"redacted": "redacted"})("redacted") == "[redacted: redacted]"


def test_secrets_shorter_than_the_minimum_are_left_alone():
    mask = SecretMask({"unused": "OPENAI_API_KEY", "x": "a", "2024": "q", "abcdefg": "seven"})
    assert MIN_MASKED == 8 and len(mask) == 0
    assert mask("unused x 2024 abcdefg") == "unused x 2024 abcdefg"
    mask.add({"abcdefgh": "eight"})
    assert mask("abcdefg abcdefgh") == "abcdefg [redacted: eight]"


def test_the_mask_never_shows_a_secret():
    mask = SecretMask({"sk-live-0123456789": "OPENAI_API_KEY"})
    assert "sk-live" not in repr(mask) and "sk-live" not in str(mask)


@given(SECRET, st.text(max_size=40), st.text(max_size=40))
def test_a_known_secret_never_survives_in_any_text(secret, before, after):
    assume(secret not in "[redacted: K]")  # the marker's own word
    masked = SecretMask({secret: "K"})(before + secret + after)
    assert secret not in masked and "[redacted: K]" in masked
