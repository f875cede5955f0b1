"""The language alone: the grammar (grammar.lark) and its parser into typed nodes with spans,
the checkers, operators, answer values and types, and the one error hierarchy. Imports nothing
else of the package.

    answer_types.py  the type language of answers (`returns=`, parameters)
    checker.py       static checks of a loaded module, every problem at once
    errors.py        the one error hierarchy; every error can carry a span
    grammar.py       grammar.lark loaded once (LALR, positions on), its terminals in plain words
    lexicon.py       the grammar's words (patterns and keywords) written once
    limits.py        how long and how deep a source text may be, and how its lines end
    nodes.py         the syntax tree: frozen dataclasses with spans, named after grammar rules
    operators.py     DecomP's operators: names and semantics
    parser.py        text -> nodes: modules, few-shot files, step lines, plans
    plans.py         ADaPT plans as the `(plan)` operator reads them
    recovery.py      error recovery: after Lark fails, the best positioned, worded error
    redact.py        credentials taken out of URLs before they are written or printed
    repair.py        an answer fitted to its declared type: coercion, repair, validation
    sizes.py         how much text an answer holds, and the error for one too large
    text.py          text cut short for messages and views
    typecheck.py     answer types followed through a program's references and operators
    values.py        answers as JSON values, substituted into sub-queries as JSON text
    waits.py         queue time: how long a call waited for a slot
    walks.py         pure walks over program bodies: steps in text order, answer numbers
"""
