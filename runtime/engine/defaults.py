"""Registers everything built in, as plugins would: the handler kinds, the `program` kind and
the model backends (`local:`, `openai:`, `fake:`)."""
from decomp.handlers import kinds  # noqa: F401
from decomp.runtime.engine import program  # noqa: F401
from decomp.runtime.models import local, openai_backend  # noqa: F401
from decomp.runtime.testing import fake  # noqa: F401
from decomp.runtime.testing import scripted  # noqa: F401
