"""How kadmin prints: rich tables for people, JSON for programs (`--output json`), progress on stderr.

Tables are rich tables without borders (columns two spaces apart, a bold header on a terminal), so they read
like Kafka's tools and still split on blanks. On a terminal rich fits them to its width and colours the
status marks; when stdout is not a terminal (a pipe, a file, the tests) they are rendered without colour at
their natural width, never wrapped or cut, with trailing blanks trimmed. Kafka-style header lines (with their
tabs) are printed as they are.

`--output json` prints one JSON document per command on stdout instead, its shape documented by each
command's result class (`to_json`); errors stay one line on stderr either way.

Progress (waiting for the controller, a reassignment, deletion) is a rich progress bar on stderr when stderr is
a terminal, otherwise a single line saying what is awaited.
"""
from __future__ import annotations

import io
import json
import sys
from contextlib import contextmanager

import click
from rich.console import Console
from rich.padding import Padding
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

# Wide enough for any table: rich lays tables out within the console width, and a narrower one would wrap or
# cut cells (rich's default width when not on a terminal is 80).
_UNLIMITED = 1 << 16
# Styles of the cells a terminal shows in colour.
STYLES = {"offline": "bold red", "under-replicated": "yellow"}


def _console(stream, tty: bool) -> Console:
    if tty:
        return Console(file=stream, highlight=False, markup=False, emoji=False)
    return Console(file=stream, width=_UNLIMITED, color_system=None, force_terminal=False, highlight=False,
                   markup=False, emoji=False, soft_wrap=False)


def table(columns: list[str], rows: list[list], indent: int = 0):
    """A borderless table of str/int/None cells (None shows as 'none'); indent: blanks before each line."""
    t = Table(box=None, pad_edge=False, show_edge=False, header_style="bold", expand=False)
    for c in columns:
        t.add_column(c, overflow="fold")
    for row in rows:
        t.add_row(*(Text("none" if v is None else str(v), style=STYLES.get(str(v), "")) for v in row))
    return Padding(t, (0, 0, 0, indent), expand=False) if indent else t


class Output:
    """Where a command's result goes: out.emit(result) prints result.render(out) or result.to_json()."""

    def __init__(self, json_output: bool):
        self.json = json_output

    def emit(self, result) -> None:
        if self.json:
            click.echo(json.dumps(result.to_json(), indent=2))
        else:
            result.render(self)

    def line(self, text: str = "") -> None:
        click.echo(text)

    def print(self, renderable) -> None:
        """A rich renderable (a table) on stdout, as described in the module docstring."""
        stream = sys.stdout
        if stream.isatty():
            _console(stream, True).print(renderable)
            return
        buf = io.StringIO()
        _console(buf, False).print(renderable)
        click.echo("\n".join(line.rstrip() for line in buf.getvalue().rstrip("\n").split("\n")))


@contextmanager
def progress(description: str, total: int | None = None):
    """Show that kadmin is waiting: yields update(done) (done out of total; total None: a spinner only).
    A rich progress bar on a terminal (removed when done); otherwise `description` once on stderr."""
    stream = sys.stderr
    if not stream.isatty():
        click.echo(description, err=True)
        yield lambda done: None
        return
    columns = [SpinnerColumn(), TextColumn("{task.description}")]
    if total is not None:
        columns += [BarColumn(), MofNCompleteColumn()]
    with Progress(*columns, TimeElapsedColumn(), console=_console(stream, True), transient=True) as bar:
        task = bar.add_task(description, total=total)
        yield lambda done: bar.update(task, completed=done)
