"""Search as a plugin: the `decomp index build` command (the `retrieve` kind that reads the
indexes is a built-in kind, `decomp.handlers.kinds.retrieve`)."""
from __future__ import annotations

from pathlib import Path

import click

from decomp.dsl.values import storable_json
from decomp.dsl.errors import DecompError
from decomp.handlers.plugins import hookimpl


@hookimpl
def register_commands(cli):
    cli.add_command(index_group)


@click.group("index")
def index_group() -> None:
    """Search indexes for the `retrieve` handler kind."""


@index_group.command("build")
@click.argument("corpus", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), help="tantivy: the index folder.")
@click.option("--add", is_flag=True, help="Add the corpus to the index already there (it gets a new version).")
@click.option("--force", is_flag=True, help="Replace an index already there.")
@click.option("--skip-bad", is_flag=True, help="Skip corpus lines that cannot be indexed (counted) instead of stopping.")
@click.option("--backend", type=click.Choice(["tantivy", "elasticsearch"]), default="tantivy", show_default=True)
@click.option("--url", help="elasticsearch: the server, http://HOST:PORT.")
@click.option("--index-name", help="elasticsearch: the index (default: the corpus file's name).")
@click.option("--server", type=click.Choice(["elasticsearch", "opensearch"]), default="elasticsearch",
              show_default=True, help="elasticsearch: opensearch sends plain JSON media types.")
def index_build(corpus: Path, out: Path | None, add: bool, force: bool, skip_bad: bool, backend: str,
                url: str | None, index_name: str | None, server: str) -> None:
    """Index CORPUS (JSON lines {"id", "title", "text"}) for BM25 retrieval; prints a JSON summary."""
    from decomp.handlers.search.build import bytes_progress, index_corpus

    with bytes_progress(corpus.stat().st_size) as tick:
        try:
            summary = index_corpus(corpus, backend=backend, out=out, url=url, index_name=index_name, server=server,
                                   add=add, force=force, skip_bad=skip_bad, progress=tick)
        except OSError as err:  # CorpusError, SearchIndexError: DecompErrors, said by the `decomp` group
            raise DecompError(str(err)) from err
    for problem in summary.pop("skipped_lines", []):
        click.echo(f"skipped: {problem}", err=True)
    click.echo(storable_json(summary))
