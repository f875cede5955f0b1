"""The language alone: the grammar (grammar.lark) and its parser into frozen dataclasses with
spans (nodes), the checker, operator names and semantics, answer values as JSON text, pure walks
over program bodies, the limits on a text's size and nesting (limits), and the one error
hierarchy. Imports nothing else of the package."""
