"""CommaQA-E passages read as facts, and the sub-questions of the CommaQA programs answered from
them: the Python handlers of fine_symbolic.decomp (the model decomposes, these answer).

A CommaQA-E passage states facts about movies, people, awards, countries and years, each in one
of a few sentence forms ("movie: X ; directed by: P.", "P acted in the movie X.", "Z was awarded
to P.", ...). `read_facts` turns a passage into relations; `simp_qa`, `pos_qa` and `aw_qa`
answer the sub-questions of prompts/decomp_fine.txt, and `qa` any of them (the coarse
decomposition's one handler). A sub-question is read by its entity (a name of the passage that
it contains, the longest first) and its relation words, so a decomposer's rewording still reads.
Answers are lists of names in the order the passage first states them; a sub-question about a
name the passage never mentions is answered [] (the passage states nothing about it), one whose
relation cannot be told is an error.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

_NAME = r"(.+?)"
#: Each sentence form of CommaQA-E: a pattern and the relation it states, as (relation, subject
#: group, object group). Relations: directed (movie -> person), movie_award (movie -> award),
#: person_award (person -> award), year (movie -> year), acted, produced, wrote (person -> movie),
#: born (person -> year), country (person -> country).
_FORMS = [
    (rf"movie: {_NAME} ; (?:directed by|director): {_NAME}", ("directed", 1, 2)),
    (rf"movie: {_NAME} ; (?:awarded|award): {_NAME}", ("movie_award", 1, 2)),
    (rf"movie: {_NAME} ; (?:release year|year): {_NAME}", ("year", 1, 2)),
    (rf"movie: {_NAME} ; (?:writer|written by): {_NAME}", ("wrote", 2, 1)),
    (rf"award: {_NAME} ; winner: {_NAME}", ("person_award", 2, 1)),
    (rf"person: {_NAME} ; award: {_NAME}", ("person_award", 1, 2)),
    (rf"{_NAME} won the {_NAME} award", ("person_award", 1, 2)),
    (rf"{_NAME} was awarded to {_NAME}", ("person_award", 2, 1)),
    (rf"{_NAME} (?:was an actor in|acted in) the movie {_NAME}", ("acted", 1, 2)),
    (rf"{_NAME} was born in (?:the year )?{_NAME}", ("born", 1, 2)),
    (rf"{_NAME} (?:is from the country of|grew up in the nation of) {_NAME}", ("country", 1, 2)),
    (rf"{_NAME} (?:was one of the producers of the movie|produced the movie) {_NAME}(?: with others)?",
     ("produced", 1, 2)),
    (rf"{_NAME} (?:was one of the writers for the movie|wrote for the movie) {_NAME}", ("wrote", 1, 2)),
]
_COMPILED = [(re.compile(pattern + r"\.?$"), relation) for pattern, relation in _FORMS]
_SENTENCE_END = re.compile(r"(?<=\.)\s+")


@dataclass
class Facts:
    """The (subject, relation, object) triples of one passage, in the passage's order."""

    triples: list[tuple[str, str, str]] = field(default_factory=list)

    def objects(self, relation: str, subject: str) -> list[str]:
        return _unique(o for s, r, o in self.triples if r == relation and s == subject)

    def subjects(self, relation: str, obj: str) -> list[str]:
        return _unique(s for s, r, o in self.triples if r == relation and o == obj)

    def names(self) -> list[str]:
        """Every name the passage mentions, the longest first (years included)."""
        found = _unique(name for s, _, o in self.triples for name in (s, o))
        return sorted(found, key=len, reverse=True)

    def is_movie(self, name: str) -> bool:
        return any((r in ("directed", "movie_award", "year") and s == name)
                   or (r in ("acted", "produced", "wrote") and o == name) for s, r, o in self.triples)


def _unique(items) -> list[str]:
    return list(dict.fromkeys(items))


def read_facts(passage: str) -> Facts:
    """The facts of a CommaQA-E passage; sentences in no known form are skipped."""
    facts = Facts()
    for sentence in _SENTENCE_END.split(passage.strip()):
        sentence = sentence.strip()
        for pattern, (relation, subject, obj) in _COMPILED:
            match = pattern.match(sentence)
            if match:
                facts.triples.append((match.group(subject).strip(), relation, match.group(obj).strip()))
                break
    return facts


# ---- sub-questions ------------------------------------------------------------------------------

def _entity(query: str, facts: Facts) -> str | None:
    """The passage's name that the sub-question is about (the longest one it contains); None
    when it names nothing the passage mentions (then the passage states no answer: [])."""
    for name in facts.names():
        if re.search(rf"(?<!\w){re.escape(name)}(?!\w)", query):
            return name
    return None


def _has(query: str, *words: str) -> bool:
    return any(re.search(rf"\b{word}", query, re.IGNORECASE) for word in words)


def simp_qa(query: str, inputs: dict) -> list[str]:
    """Who was born in a year, who is from a country: 'Which people were born in 1927?',
    'Which people are from the country Marrowfen?'."""
    facts = read_facts(inputs["context"])
    name = _entity(query, facts)
    if name is None:
        return []
    if _has(query, "born"):
        return facts.subjects("born", name)
    if _has(query, "country", "nation", "from"):
        return facts.subjects("country", name)
    raise ValueError(f"not a question about birth years or countries: {query!r}")


_ROLES = (("acted", ("act",)), ("directed", ("direct",)), ("produced", ("produc",)), ("wrote", ("writ", "wrote")))


def pos_qa(query: str, inputs: dict) -> list[str]:
    """Who did what in which movie: 'Which movies did Halvorick direct?' (a person's movies in a
    role), 'Who acted in the movie Quillmarsh?' (a movie's people in a role)."""
    facts = read_facts(inputs["context"])
    name = _entity(query, facts)
    if name is None:
        return []
    for relation, words in _ROLES:
        if _has(query, *words):
            if relation == "directed":  # stated movie -> director
                return facts.subjects("directed", name) if not facts.is_movie(name) else facts.objects("directed", name)
            return facts.subjects(relation, name) if facts.is_movie(name) else facts.objects(relation, name)
    raise ValueError(f"not a question about acting, directing, producing or writing: {query!r}")


def aw_qa(query: str, inputs: dict) -> list[str]:
    """Awards: 'Which awards did Quillmarsh win?' (a movie's or a person's awards), 'Which movies
    won the Brassfinch award?', 'Which people won the Brassfinch award?'."""
    facts = read_facts(inputs["context"])
    name = _entity(query, facts)
    if name is None:
        return []
    if facts.subjects("movie_award", name) or facts.subjects("person_award", name):  # name is an award
        if _has(query, "movie", "film"):
            return facts.subjects("movie_award", name)
        if _has(query, "who", "people", "person"):
            return facts.subjects("person_award", name)
        return facts.subjects("movie_award", name) + facts.subjects("person_award", name)
    if not _has(query, "award", "won", "win"):
        raise ValueError(f"not a question about awards: {query!r}")
    return facts.objects("movie_award", name) if facts.is_movie(name) else facts.objects("person_award", name)


def qa(query: str, inputs: dict) -> list[str]:
    """Any sub-question of the three kinds (the coarse decomposition's one handler)."""
    lowered = query.lower()
    if "award" in lowered or re.search(r"\bw[io]n\b", lowered):
        return aw_qa(query, inputs)
    if "born" in lowered or "country" in lowered or "nation" in lowered or " from " in lowered:
        return simp_qa(query, inputs)
    return pos_qa(query, inputs)
