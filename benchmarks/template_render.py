"""Benchmark: microseconds per render of ordinary prompt templates in decomp's bounded Jinja sandbox.

Renders the bundled ODQA multi-hop prompt (`programs/odqa/prompts/multi_hop.j2`: a `for` over
retrieved paragraphs through `|sum(start=[])|unique(attribute="id")`, two outputs each) and a
small few-shot template (a loop over examples with `loop.index`, `~`, `|join`, `|trim`, an `if`,
a list literal and a `%` format), each `--renders` times per run, `--repeat` runs, the fastest
kept (CPU noise only adds). The same templates in Jinja's plain `ImmutableSandboxedEnvironment`
give the sandbox's own cost beside it:

    us_per_render[name]       decomp's environment (`JINJA.from_string(...).render_within`)
    plain_us_per_render[name] Jinja's ImmutableSandboxedEnvironment, the same template
    ratio[name]               us_per_render / plain_us_per_render

    python benchmarks/template_render.py [--renders 2000] [--repeat 7] [--paragraphs 5]
"""
from __future__ import annotations

import time

if __package__ in (None, ""):  # `python benchmarks/NAME.py`: see harness.bootstrap
    import harness
    harness.bootstrap()

from benchmarks.harness import REPO, emit, parser  # noqa: E402

FEWSHOT = """Answer each question with one word.
{% for ex in examples %}
Example {{ loop.index }}: {{ ex.q | trim }}
Answer: {{ ex.a ~ '.' }}{% if ex.tags %} ({{ ex.tags | join(', ') }}){% endif %}
{% endfor %}
{% set parts = [query, 'now'] %}Q: {{ parts | join(' ') }} ({{ '%d examples' % examples | length }})
A:"""


def _variables(paragraphs: int) -> dict:
    hops = [[{"id": f"d{h}-{i}", "title": f"Title {h} {i}", "text": "Some paragraph text. " * 25}
             for i in range(paragraphs)] for h in range(2)]
    examples = [{"q": f"  What is item {i}?  ", "a": f"thing{i}", "tags": ["x", "y"] if i % 2 else []}
                for i in range(8)]
    return {"values": [*hops, "Where was the builder of Gull Rock Light born?"], "query": "Who built it?",
            "examples": examples}


def _time(render, variables: dict, renders: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        for _ in range(renders):
            render(**variables)
        best = min(best, time.process_time() - started)
    return best / renders * 1e6


def main(argv: list[str] | None = None) -> dict:
    p = parser(__doc__)
    p.add_argument("--renders", type=int, default=2000)
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--paragraphs", type=int, default=5, help="paragraphs per retrieval hop")
    args = p.parse_args(argv)

    from jinja2 import StrictUndefined
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    from decomp.handlers.sandbox.templates import JINJA

    plain = ImmutableSandboxedEnvironment(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)
    sources = {"multi_hop": (REPO / "programs/odqa/prompts/multi_hop.j2").read_text(), "fewshot": FEWSHOT}
    variables = _variables(args.paragraphs)
    ours, theirs = {}, {}
    for name, source in sources.items():
        bounded, reference = JINJA.from_string(source), plain.from_string(source)
        assert bounded.render_within(10.0, **variables) == reference.render(**variables)
        ours[name] = round(_time(lambda **v: bounded.render_within(10.0, **v), variables, args.renders,
                                 args.repeat), 1)
        theirs[name] = round(_time(reference.render, variables, args.renders, args.repeat), 1)
    return emit({"benchmark": "template_render", "renders": args.renders, "us_per_render": ours,
                 "plain_us_per_render": theirs, "ratio": {k: round(ours[k] / theirs[k], 2) for k in ours}})


if __name__ == "__main__":
    main()
