"""TextCraft (ADaPT's crafting benchmark): the `textcraft` environment, its recipes and solver,
the symbolic `textcraft_executor` / `textcraft_planner` kinds and a task generator. Importing the
package registers the environment and the kinds."""
from decomp.handlers.textcraft import env, symbolic  # noqa: F401
